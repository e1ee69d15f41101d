"""One conversation with a port, judged against HF: what the port returned at which positions of
each row's token history, and HF's logits there from one forward over that whole history (no cache,
batch 1), within the float32 tolerance table. The first position beyond it is the divergence.

HF computes the same logits two ways, and they need not agree to the last bits: its one-pass forward
and its own token-by-token decode over a ``DynamicCache`` differ on the 31B geometry by up to 5.6e-4
in float32 (more than the float32 tolerance, 5.4e-4 there) and by 1.4e-5 even in float64 (from
position 38 of a 64-token prompt; this runtime's one-token chunks equal HF's token-by-token decode
exactly in float64). Where a port's logits leave the one-pass forward by more than the tolerance,
the position is judged again against the tolerance plus HF's own disagreement there (its
token-by-token decode of the same history, computed only then), so a port is never held to more
than HF can agree with itself; that disagreement is reported beside the error."""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ..numerics.metrics import measure
from ..references.recording import recorded
from ..results import tolerances

KEPT_HISTORIES = 4  # HF's answers kept per model object
_HISTORIES: weakref.WeakKeyDictionary[torch.nn.Module, dict[tuple, torch.Tensor]] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class Observation:
    """The port's logits ``(vocab,)`` at ``position`` of a row's history, and what returned them
    (``kind``: a chunk's end, the prompt's last token, every position, a decode step)."""

    position: int
    logits: torch.Tensor
    kind: str


@dataclass
class Observed:
    """Per row, every output of the port that stands for logits at a position of the row's history,
    in the order they were returned. One position may be observed more than once (the last chunk's
    end is the prompt's last token; every position's logits include both): each is judged, so no
    output of the port hides behind another."""

    rows: dict[int, list[Observation]] = field(default_factory=dict)

    def add(self, row: int, position: int, logits: torch.Tensor, kind: str) -> None:
        self.rows.setdefault(row, []).append(Observation(position, logits, kind))

    def by_position(self, row: int) -> list[Observation]:
        """Row ``row``'s observations in position order (those at one position in the order returned)."""
        return sorted(self.rows[row], key=lambda observation: observation.position)


@dataclass(frozen=True)
class Judgement:
    """The largest error relative to its tolerance, and where the first divergence is (or ``None``)."""

    error: float
    tolerance: float
    compared: int
    first: str | None = None
    hf_disagreement: float = 0.0  # the largest of HF's own two computations' differences used as slack

    @property
    def diverged(self) -> bool:
        return self.first is not None


@dataclass(frozen=True)
class Scored:
    """A case's logits against HF in float64 (a low-precision profile): the SQNR of ours and of HF in
    the same profile over the same positions, the gate, and the first position below it (or ``None``)."""

    sqnr_db: float
    hf_sqnr_db: float
    gate_db: float
    first: str | None

    @property
    def diverged(self) -> bool:
        return self.first is not None


@recorded
@torch.no_grad()
def hf_history_logits(model, ids: torch.Tensor) -> torch.Tensor:
    """HF's logits ``(N, vocab)`` at every position of one row's token history ``ids (N,)`` (read-only:
    the last few histories' answers are kept per model object, whose weights the suite never changes
    in place, as :func:`..references.recording.fingerprint` assumes; a long context asked by every run
    in a process is computed once). A model with forward hooks (expert choices pinned at routing ties,
    :mod:`..checks.routing`) always runs: its hooks decide the answer."""
    if any(module._forward_hooks or module._forward_pre_hooks for module in model.modules()):
        return _history_forward(model, ids)
    kept = _HISTORIES.setdefault(model, {})
    key = (model.config._attn_implementation, ids.numpy().tobytes())
    if key not in kept:
        while len(kept) >= KEPT_HISTORIES:
            kept.pop(next(iter(kept)))
        kept[key] = _history_forward(model, ids)
    return kept[key]


def _history_forward(model, ids: torch.Tensor) -> torch.Tensor:
    return model(input_ids=ids[None], attention_mask=torch.ones_like(ids)[None]).logits[0]


@recorded
@torch.no_grad()
def hf_token_by_token_logits(model, ids: torch.Tensor) -> torch.Tensor:
    """HF's logits ``(N, vocab)`` for ``ids (N,)`` fed one token at a time through its ``DynamicCache``."""
    cache, steps = None, []
    for token in ids:
        output = model(input_ids=token.view(1, 1), cache=cache, use_cache=True)
        cache = output.cache
        steps.append(output.logits[0, -1])
    return torch.stack(steps)


# How far past the tolerance HF's own disagreement is consulted: HF's one-pass forward and its
# token-by-token decode differ by at most 1.04x the float32 tolerance on the embedded models (31B
# geometry: 5.6e-4 against 5.4e-4; routing ties pinned); an error beyond 4x is not rounding, and
# HF's second computation (a forward per token) is not run for it.
SLACK_REACH = 4.0


def judge(
    references: dict[int, torch.Tensor], observed: Observed, second: Callable[[int], torch.Tensor | None] | None = None
) -> Judgement:
    """Compare every observed position of every row with HF's logits over that row's history
    (``references[row] (N, vocab)``, :func:`hf_history_logits`) within the float32 tolerance of those
    logits (``tolerances.relative``); beyond it (up to :data:`SLACK_REACH` times it), within the
    tolerance plus HF's own disagreement there with ``second(row)`` (HF's second computation of that row's logits, e.g.
    :func:`hf_token_by_token_logits`; ``None``: none). The first divergence named by row, position and
    kind (rows in order, positions in order)."""
    worst, compared, first, slack_used = (0.0, tolerances.RELATIVE[torch.float32]), 0, None, 0.0
    for row in sorted(observed.rows):
        reference, other, observations = references[row], None, observed.by_position(row)
        tolerance = tolerances.relative(torch.float32, reference[: observations[-1].position + 1])
        for observation in observations:
            position, ours = observation.position, observation.logits
            same_shape = ours.shape == reference[position].shape
            error = float((ours.float() - reference[position]).abs().max()) if same_shape else float("inf")
            error = error if error == error else float("inf")  # NaN: as far as it gets
            bound = tolerance
            if tolerance < error <= SLACK_REACH * tolerance and second is not None:
                other = second(row) if other is None else other
                if other is not None:
                    slack = float((other[position] - reference[position]).abs().max())
                    bound, slack_used = tolerance + slack, max(slack_used, slack)
            compared += 1
            if error / bound > worst[0] / worst[1]:
                worst = (error, bound)
            if first is None and error > bound:
                first = f"row {row} position {position} ({observation.kind}): {error:.3g} > {bound:.3g}"
    return Judgement(worst[0], worst[1], compared, first, slack_used)


def judge_in_profile(references: dict[int, torch.Tensor], observed: Observed, gate_db: float) -> Judgement:
    """Compare every observed position of every row with HF's logits in float64 over that row's
    history, as the SQNR of the port's logits there (a low-precision profile or an integer scheme:
    the profile's gate, ``gate_db``); the first position below it named by row, position and kind.
    The judgement's error and tolerance are ``-SQNR`` and ``-gate`` (the larger, the worse)."""
    worst, compared, first = (-math.inf, -gate_db), 0, None
    for row in sorted(observed.rows):
        for observation in observed.by_position(row):
            position, ours, reference = observation.position, observation.logits, references[row][observation.position]
            sqnr = measure(ours.float(), reference.float()).sqnr_db if ours.shape == reference.shape else -math.inf
            sqnr = sqnr if sqnr == sqnr else -math.inf  # NaN: as far as it gets
            compared += 1
            worst = max(worst, (-sqnr, -gate_db))
            if first is None and not sqnr >= gate_db:
                where = f"row {row} position {position} ({observation.kind})"
                first = f"{where}: {sqnr:.1f} dB against float64 < gate {gate_db:g} dB"
    return Judgement(worst[0], worst[1], compared, first)


def greedy_divergence(tokens: list[int], logits: torch.Tensor, bound: torch.Tensor | float) -> str | None:
    """The first generated token (of ``tokens``) that leaves HF's greedy choice by more than ``bound``
    (one value, or ``(T,)`` per step): HF's lead of its own token over the one taken there (a token
    outside the vocabulary: none taken), where ``logits (T, vocab)`` are HF's at each step; else ``None``."""
    bounds = torch.as_tensor(bound, dtype=torch.float64).expand(len(tokens))
    for step, token in enumerate(tokens):
        best = int(logits[step].argmax())
        lead = float(logits[step, best] - logits[step, token]) if 0 <= token < logits.shape[1] else math.inf
        if token != best and not lead <= float(bounds[step]):
            return f"step {step}: {token} where HF's argmax {best} leads it by {lead:.3g} (> {float(bounds[step]):.3g})"
    return None
