"""The schedules grid's second reference (HF's token-by-token decode, consulted only for a position
just past the tolerance) when HF's answers come from a recording: recorded where the recording run
consulted it, read back in a replay and judged the same; a replay of a recording that lacks it judges
the case without it (no error: the first reference decides)."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from gemma4_static.oracle.episodes import scores
from gemma4_static.oracle.episodes.cases import Case
from gemma4_static.oracle.episodes.judgement import Observed, hf_history_logits
from gemma4_static.oracle.episodes.scores import hf_references
from gemma4_static.oracle.references.recording import Recording
from gemma4_static.oracle.references.samples import text_prompt
from gemma4_static.oracle.results import tolerances

SECOND = "judgement.hf_token_by_token_logits"


def judged(model, recording: Recording, past_tolerance: float):
    """A case of 8 tokens and 2 decode steps whose last position is ``past_tolerance`` tolerances off
    HF's, scored through ``recording``; the judgement and the calls the recording holds."""
    base = text_prompt(model.config, [12], seed=3)
    with recording.active():
        score = hf_references(SimpleNamespace(model=model, routing=None), base)
        reference = hf_history_logits(model, base.input_ids[0])
        tolerance = tolerances.relative(torch.float32, reference[:10])
        observed = Observed()
        ours = reference[9].clone()
        ours[0] += past_tolerance * tolerance
        observed.add(0, 9, ours, "decode step 1")
        judgement = score(Case(8, "one call", (8,), 2, None), observed)
    return judgement, {entry["call"] for entry in recording.calls.values()}


def test_the_second_reference_is_recorded_and_read_back_where_it_was_consulted(tiny_model):
    recording = Recording("record")
    live, calls = judged(tiny_model, recording, 1.5)
    assert SECOND in calls and live.diverged  # consulted past the tolerance; HF agrees with itself closer
    replay = Recording("replay", recording.calls, recording.tensors)
    replayed, _ = judged(tiny_model, replay, 1.5)
    assert replayed == live


def test_a_recording_without_the_second_reference_judges_the_case_by_the_first(tiny_model):
    recording = Recording("record")
    inside, calls = judged(tiny_model, recording, 0.5)
    assert SECOND not in calls and not inside.diverged  # inside the tolerance: never consulted
    replayed, _ = judged(tiny_model, Recording("replay", recording.calls, recording.tensors), 1.5)
    assert replayed.diverged and replayed.hf_disagreement == 0.0 and replayed.compared == 1


def test_with_expert_choices_recorded_hf_runs_each_cases_own_history(tiny_model, monkeypatch):
    """Without routing recorded, one HF forward over the base serves every case; with it (a MoE model
    on this runtime in float32), HF runs each case's history after the case, none before."""
    asked: list[int] = []

    def forward(model, history: torch.Tensor) -> torch.Tensor:
        asked.append(len(history))
        return hf_history_logits(model, history)

    monkeypatch.setattr(scores, "hf_history_logits", forward)
    base = text_prompt(tiny_model.config, [12], seed=3)
    observed = Observed()
    observed.add(0, 9, hf_history_logits(tiny_model, base.input_ids[0][:10])[9], "decode step 1")
    for routing, before, after in ((None, [12], [12]), ("recorded", [], [10])):
        asked.clear()
        score = scores.hf_references(SimpleNamespace(model=tiny_model, routing=routing), base, token_by_token=False)
        assert asked == before
        judgement = score(Case(8, "one call", (8,), 2, None), observed)
        assert asked == after and judgement.compared == 1 and not judgement.diverged
