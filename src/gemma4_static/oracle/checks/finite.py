"""Every value a port returns is finite, its padded positions included: a NaN there is one mask away
from a valid row (a fully masked softmax row, a NaN times a zero weight), and the comparisons read
only valid positions. ``verify``'s layers group and the fuzzer both ask it of every tensor returned."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import torch

from ...ports import PortPrefill
from ..results import tolerances
from ..results.report import Row

PREFILL_FIELDS = ("logits", "all_logits", "hidden_states", "per_layer_inputs", "soft_tokens", "chunk_logits")


def returned_tensors(result: PortPrefill) -> Iterator[tuple[str, torch.Tensor]]:
    """``(name, tensor)`` of every tensor a prefill returned (``extra`` aside: what a port keeps for itself)."""
    for name in PREFILL_FIELDS:
        value = getattr(result, name)
        values = value if isinstance(value, tuple) else () if value is None else (value,)
        for index, tensor in enumerate(values):
            yield (f"{name}[{index}]" if isinstance(value, tuple) else name), tensor


def count_non_finite(tensor: torch.Tensor) -> int:
    """How many values of ``tensor`` are NaN or infinite (none of an integer tensor)."""
    return int((~torch.isfinite(tensor.detach())).sum()) if tensor.is_floating_point() else 0


def non_finite(named: Iterable[tuple[str, torch.Tensor]]) -> str | None:
    """The first named tensor holding NaN or infinity, with how many such values; ``None`` when all are finite."""
    for name, tensor in named:
        count = count_non_finite(tensor)
        if count:
            return f"{name} holds {count} values that are NaN or infinite (of {tensor.numel()})"
    return None


def finite_row(stage: str, check: str, named: Iterable[tuple[str, torch.Tensor]]) -> Row:
    """A row counting the non-finite values of the ``(name, tensor)`` pairs (exact: none allowed), the
    first tensor holding any named in its detail."""
    pairs = list(named)
    count = sum(count_non_finite(tensor) for _, tensor in pairs)
    return Row(stage, check, "non-finite values", count, tolerances.EXACT, detail=non_finite(pairs) or "")
