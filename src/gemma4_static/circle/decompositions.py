"""The rewrite applied while a stage is exported for TICO, so that onert runs its Circle graph: a
``linear`` on more than two dims becomes a ``linear`` on the rows flattened to two dims, reshaped
back (the same math, exact). onert ignores ``keep_num_dims`` of a rank-3 ``FULLY_CONNECTED``: its
output comes back rank 2, and the next elementwise operator refuses to broadcast it ("Incompatible
shapes for broadcast" at prepare). Applied around ``torch.export`` (the reshapes are traced as the
module's own), not as an ATen decomposition (TICO's passes fold that reshape of a transposed
attention output into an impossible view)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
import torch.nn.functional as F

_LINEAR = F.linear


def _rows_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    if x.dim() <= 2:
        return _LINEAR(x, weight, bias)
    return _LINEAR(x.reshape(-1, x.shape[-1]), weight, bias).reshape(*x.shape[:-1], weight.shape[0])


@contextlib.contextmanager
def rank2_linear() -> Iterator[None]:
    """``torch.nn.functional.linear`` (and so every ``nn.Linear``) on rows flattened to two dims while
    the block runs."""
    F.linear = _rows_linear
    try:
        yield
    finally:
        F.linear = _LINEAR
