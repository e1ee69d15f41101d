"""One conversation with a port, judged against HF: what the port returned at which positions of
each row's token history, and HF's logits there from one forward over that whole history (no cache,
batch 1), within the float32 tolerance table. The first position beyond it is the divergence."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..checks import tolerances


@dataclass
class Observed:
    """Per row, the port's logits ``(vocab,)`` by position of the row's history (a chunk's last token,
    the prompt's last token, each decode step), with what the position was."""

    logits: dict[int, dict[int, torch.Tensor]] = field(default_factory=dict)
    kinds: dict[tuple[int, int], str] = field(default_factory=dict)

    def add(self, row: int, position: int, logits: torch.Tensor, kind: str) -> None:
        self.logits.setdefault(row, {})[position] = logits
        self.kinds.setdefault((row, position), kind)


@dataclass(frozen=True)
class Judgement:
    """The largest error relative to its tolerance, and where the first divergence is (or ``None``)."""

    error: float
    tolerance: float
    compared: int
    first: str | None = None

    @property
    def diverged(self) -> bool:
        return self.first is not None


@torch.no_grad()
def hf_history_logits(model, ids: torch.Tensor) -> torch.Tensor:
    """HF's logits ``(N, vocab)`` at every position of one row's token history ``ids (N,)``."""
    return model(input_ids=ids[None], attention_mask=torch.ones_like(ids)[None]).logits[0]


def judge(references: dict[int, torch.Tensor], observed: Observed) -> Judgement:
    """Compare every observed position of every row with HF's logits over that row's history
    (``references[row] (N, vocab)``, :func:`hf_history_logits`) within the float32 tolerance of those
    logits (``tolerances.relative``); the first divergence named by row, position and kind (rows in
    order, positions in order)."""
    worst, compared, first = (0.0, tolerances.RELATIVE[torch.float32]), 0, None
    for row, by_position in sorted(observed.logits.items()):
        reference = references[row]
        tolerance = tolerances.relative(torch.float32, reference[: max(by_position) + 1])
        for position in sorted(by_position):
            ours = by_position[position]
            same_shape = ours.shape == reference[position].shape
            error = float((ours.float() - reference[position]).abs().max()) if same_shape else float("inf")
            error = error if error == error else float("inf")  # NaN: as far as it gets
            compared += 1
            if error / tolerance > worst[0] / worst[1]:
                worst = (error, tolerance)
            if first is None and error > tolerance:
                kind = observed.kinds[(row, position)]
                first = f"row {row} position {position} ({kind}): {error:.3g} > {tolerance:.3g}"
    return Judgement(worst[0], worst[1], compared, first)
