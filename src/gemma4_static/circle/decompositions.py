"""Rewrites applied while a stage is exported for TICO, so that its Circle graph converts and onert
runs it; each computes the same values, exactly:

- a ``linear`` on more than two dims becomes a ``linear`` on the rows flattened to two dims, reshaped
  back: onert ignores ``keep_num_dims`` of a rank-3 ``FULLY_CONNECTED`` (its output comes back rank
  2, and the next elementwise operator refuses to broadcast it: "Incompatible shapes for broadcast"
  at prepare);
- the KV cache's slot placement (a ``scatter``, which TICO does not convert:
  ``NotYetSupportedError``) becomes a one-hot product: each slot keeps its value times one minus
  whether a position writes it, plus the one-hot rows times the new K/V (one times the value plus
  zeros: exact, the slots of one call being distinct). The scatter's index broadcast (an int64
  ``BROADCAST_TO``) is what onert cannot run, so the slots are compared as they come, ``(B, S)``.

Applied around ``torch.export`` (traced as the module's own operators), not as ATen decompositions
(TICO's passes fold the reshape of a transposed attention output into an impossible view)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
import torch.nn.functional as F

from ..npu import decoder

_LINEAR = F.linear
_PLACE = decoder.place_in_cache


def _rows_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    if x.dim() <= 2:
        return _LINEAR(x, weight, bias)
    return _LINEAR(x.reshape(-1, x.shape[-1]), weight, bias).reshape(*x.shape[:-1], weight.shape[0])


def _one_hot_place(
    cache: tuple[torch.Tensor, torch.Tensor], key: torch.Tensor, value: torch.Tensor, slots: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`~gemma4_static.npu.decoder.place_in_cache` as a one-hot product: ``(B, 1, slots, S)``
    rows (the slot indices compared in float32, exact below 2**24) times ``(B, kv_heads, S, D)``."""
    capacity = cache[0].shape[2]
    indices = torch.arange(capacity, dtype=torch.float32, device=slots.device)
    chosen = (indices[None, :, None] == slots.to(torch.float32)[:, None, :]).to(key.dtype)[:, None]
    keep = 1 - chosen.sum(-1, keepdim=True)
    return cache[0] * keep + chosen @ key, cache[1] * keep + chosen @ value


@contextlib.contextmanager
def circle_rewrites() -> Iterator[None]:
    """Every ``linear`` on rows flattened to two dims and the cache placement as a one-hot product while
    the block runs (the export of a stage for TICO)."""
    F.linear, decoder.place_in_cache = _rows_linear, _one_hot_place
    try:
        yield
    finally:
        F.linear, decoder.place_in_cache = _LINEAR, _PLACE
