"""The ``schedules`` group's judgement of its cases (:mod:`.cases` runs them): each case's
logits against HF's forward over its history, within the float32 tolerances (HF's token-by-token
decode widening a bound where HF's own two computations disagree, :func:`.judgement.judge`), or
in a low-precision profile as an SQNR against HF in float64 under the profile's gate for the
chunked prefill and the decode steps (the lower of the two), HF's own figure in the profile beside;
and one report row per prompt length, naming the first failing schedule and position."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import torch

from ..numerics.metrics import measure
from ..references.hf import hf_all_logits
from ..references.recording import answered_or_none
from ..references.samples import Prompt
from ..results.report import Row, counted
from ..session.session import Session
from .cases import Case, Score
from .judgement import Judgement, Observed, Scored, hf_history_logits, hf_token_by_token_logits, judge


def base_logits(model: Any, base: Prompt) -> torch.Tensor:
    """HF's logits ``(N, vocab)`` at every position of the grid's one-row ``base`` prompt (its images too)."""
    if base.pixel_values is None:
        return hf_history_logits(model, base.input_ids[0])
    return hf_all_logits(model, base)[0]


def scored_in_profile(session: Session, base: Prompt) -> Score:
    """Scores a case's observed logits against HF float64's over ``base`` (one forward each of HF
    in float64 and in the profile serves every case)."""
    gate = session.gate
    gate_db = min(gate.sqnr_gate("chunked prefill"), gate.sqnr_gate("decode steps"))
    reference = base_logits(session.reference_model, base)
    hf = base_logits(session.hf_model, base)

    def score(case: Case, observed: Observed) -> Scored:
        observations = observed.by_position(0)
        positions = [observation.position for observation in observations]
        ours = torch.stack([observation.logits for observation in observations])
        mine = measure(ours, reference[positions]).sqnr_db
        first = None
        if not mine >= gate_db:  # NaN fails too
            below = ((o, measure(o.logits, reference[o.position]).sqnr_db) for o in observations)
            observation, value = next(((o, v) for o, v in below if not v >= gate_db), (None, mine))
            where = f"over {len(positions)} positions" if observation is None else f"position {observation.position}"
            kind = "" if observation is None else f" ({observation.kind})"
            first = f"{where}{kind}: {value:.1f} dB"
        return Scored(mine, measure(hf[positions], reference[positions]).sqnr_db, gate_db, first)

    return score


def hf_references(session: Session, base: Prompt, *, token_by_token: bool = True) -> Score:
    """Judges a case just run against HF's one-pass logits over its history (a prefix of ``base``'s
    one row) and, asked only past the tolerance, HF's token-by-token logits (:func:`.judgement.judge`;
    text only: with images none is asked). One forward over ``base`` serves every case, except where
    expert choices are recorded (a MoE model on this runtime in float32): there HF runs each case's
    history after the case, pinned at routing ties to that run's own choices (:mod:`..checks.routing`),
    since another chunking may settle a tie otherwise. Judged from a recording, the token-by-token
    logits are there only where the recording run consulted them (else the case is judged without);
    without ``token_by_token`` none is asked (a context so long that HF's decode of it would cost
    more than the rest of the run)."""
    model, ids = session.model, base.input_ids[0]

    def of(history: torch.Tensor) -> tuple[torch.Tensor, Callable[[int], torch.Tensor | None]]:
        if base.pixel_values is not None:
            return base_logits(model, base), lambda row: None
        if not token_by_token:
            return hf_history_logits(model, history), lambda row: None
        second = functools.cache(lambda row: answered_or_none(hf_token_by_token_logits, model, history))
        return hf_history_logits(model, history), second

    shared = of(ids) if session.routing is None else None

    def score(case: Case, observed: Observed) -> Judgement:
        reference, second = shared or of(ids[: case.length + case.steps])
        return judge({0: reference}, observed, second)

    return score


def length_row(length: int, results: list[tuple[Case, Judgement | str]], stage: str) -> Row:
    """One prompt length's schedules as one row: the worst error relative to its tolerance; a failure
    names the first failing schedule and position, and lists the next five failing cases in the detail."""
    judged, raised, check, failing = _outcomes(length, results)
    worst = max((outcome for _, outcome in judged), key=lambda j: j.error / j.tolerance, default=None)
    value, tolerance = (worst.error, worst.tolerance) if worst else (float("inf"), 0.0)
    disagreement = max((outcome.hf_disagreement for _, outcome in judged), default=0.0)
    hf = disagreement or None  # HF's one-pass forward vs its token-by-token decode, where it widened a bound
    row = Row(stage, check, "max abs diff", value if not raised else float("inf"), tolerance, hf=hf)
    return dataclasses.replace(row, detail="\n".join(failing[1:6]), raised=raised[0][1] if raised else "")


def sqnr_row(length: int, results: list[tuple[Case, Scored | str]], stage: str) -> Row:
    """One prompt length's schedules in a low-precision profile: the worst case's SQNR against float64
    (HF's in the profile at its positions beside), gated; a failure names the first failing schedule
    and position, and lists the next five failing cases in the detail."""
    judged, raised, check, failing = _outcomes(length, results)
    worst = min((outcome for _, outcome in judged), key=lambda scored: scored.sqnr_db, default=None)
    value = float("nan") if raised or worst is None else worst.sqnr_db
    gate, hf = (worst.gate_db, worst.hf_sqnr_db) if worst else (float("inf"), None)
    row = Row(stage, f"{check}, vs float64", "SQNR dB", value, gate, higher_is_better=True, hf=hf)
    return dataclasses.replace(row, detail="\n".join(failing[1:6]), raised=raised[0][1] if raised else "")


def _outcomes(length: int, results: list[tuple[Case, Any]]) -> tuple[list, list, str, list[str]]:
    """A prompt length's judged and raised cases, its row's check text, and every failing case named
    (the first in the check text)."""
    judged = [(case, outcome) for case, outcome in results if not isinstance(outcome, str)]
    raised = [(case, outcome) for case, outcome in results if isinstance(outcome, str)]
    failing = [f"{case.describe()}: raised {tb.strip().splitlines()[-1]}" for case, tb in raised]
    failing += [f"{case.describe()}: {outcome.first}" for case, outcome in judged if outcome.diverged]
    steps = results[0][0].steps
    check = f"prompt {length}: {counted(len(results), 'schedule')}, chunk ends, last token, {steps} decode steps"
    if failing:
        check += f" [first: {failing[0]}]"
    return judged, raised, check, failing
