"""A case scored in a low-precision profile (the grid and the fuzzer there; the numerics lane runs
them on real models): the SQNR of its observed logits against HF in float64 over the positions it
observed, HF's own in the profile beside, and the first position below the gate."""

from __future__ import annotations

import math
from types import SimpleNamespace

import torch

from gemma4_static.oracle.episodes import scores
from gemma4_static.oracle.episodes.judgement import Observed
from gemma4_static.oracle.numerics.metrics import measure

VOCAB, LENGTH = 16, 6
REFERENCE = torch.linspace(-3, 3, LENGTH * VOCAB, dtype=torch.float64).reshape(LENGTH, VOCAB)
WOBBLE = torch.cos(torch.arange(VOCAB, dtype=torch.float64))


def _score(monkeypatch, gates: dict[str, float]):
    """The scorer of a session whose reference model answers REFERENCE and whose HF in the profile
    answers it with a wobble 40 dB down."""
    hf = REFERENCE + WOBBLE * 0.03
    monkeypatch.setattr(scores, "base_logits", lambda model, base: {"float64": REFERENCE, "profile": hf}[model])
    session = SimpleNamespace(
        gate=SimpleNamespace(sqnr_gate=gates.__getitem__), reference_model="float64", hf_model="profile"
    )
    return scores.scored_in_profile(session, base=None), hf


def test_a_case_is_scored_over_its_observed_positions_and_names_the_first_below_the_gate(monkeypatch):
    score, hf = _score(monkeypatch, {"chunked prefill": 25.0, "decode steps": 20.0})
    observed = Observed()
    for position, noise, kind in ((1, 0.0, "chunk end"), (3, 1.0, "decode step"), (4, 0.0, "decode step")):
        observed.add(0, position, (REFERENCE[position] + noise * WOBBLE).float(), kind)
    scored = score(None, observed)
    positions = [1, 3, 4]
    ours = torch.stack([observation.logits for observation in observed.by_position(0)])
    assert scored.gate_db == 20.0  # the lower of the two stages' gates
    assert scored.sqnr_db == measure(ours, REFERENCE[positions]).sqnr_db < 20.0
    assert scored.hf_sqnr_db == measure(hf[positions], REFERENCE[positions]).sqnr_db
    below = measure(observed.by_position(0)[1].logits, REFERENCE[3]).sqnr_db
    assert scored.first == f"position 3 (decode step): {below:.1f} dB"


def test_a_case_within_the_gate_names_no_position(monkeypatch):
    score, _ = _score(monkeypatch, {"chunked prefill": 25.0, "decode steps": 20.0})
    observed = Observed()
    observed.add(0, 2, REFERENCE[2].float(), "prompt's last token")
    scored = score(None, observed)
    assert scored.first is None and scored.sqnr_db > 20.0 and not math.isnan(scored.sqnr_db)
