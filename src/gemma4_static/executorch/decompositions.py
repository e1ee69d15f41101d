"""Decompositions applied when a stage is exported for lowering, so that XNNPACK takes whole
decoder layers instead of the pieces between operators it cannot take.

Each rewrites one operator into the same math in operators XNNPACK's partitioner accepts, and
declines (``NotImplemented``: the operator is traced as it is) where the rewrite does not apply:

- ``pow(x, -0.5)`` (RMSNorm) -> ``rsqrt(x)``: XNNPACK takes only ``pow(x, 2)``.
- ``mean(x, -1, keepdim=True)`` -> the mean over the two innermost dims of ``x`` viewed as
  ``(N, 1, 1, L)``: XNNPACK's mean is a 4-D global pooling over the innermost dims.
- ``unsqueeze(x, d)`` not at the end -> a ``view``: XNNPACK unsqueezes only the trailing dim.
- ``scaled_dot_product_attention`` (fp32, with an additive mask) -> batched matmuls with the
  query heads grouped per K/V head (no ``expand`` of K/V), the mask added per head and
  ``softmax``; scores are clamped at the dtype's lowest finite value so a row of a query that
  sees no key (padding) stays finite, as torch's safe softmax keeps it.
- ``gelu`` -> the formula itself, so a backend cannot swap the tanh approximation for the exact
  form (XNNPACK's GELU kernel computes the erf form: 5e-4 off on values of 12).
"""

from __future__ import annotations

import math
from typing import Any

import torch

aten = torch.ops.aten


def _gelu(x: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    if approximate == "tanh":
        return 0.5 * x * (1.0 + torch.tanh((2.0 / torch.pi) ** 0.5 * (x + 0.044715 * x * x * x)))
    return 0.5 * x * (1.0 + torch.erf(x * 0.5**0.5))


def _pow(x: torch.Tensor, exponent: Any) -> Any:
    return torch.rsqrt(x) if exponent == -0.5 else NotImplemented


def _mean(x: torch.Tensor, dims: Any, keepdim: bool = False, *, dtype: Any = None) -> Any:
    last_only = dims is not None and len(dims) == 1 and dims[0] in (-1, x.dim() - 1)
    if not (last_only and keepdim and dtype is None and x.dim() >= 2):
        return NotImplemented
    pooled = aten.mean.dim(x.reshape(-1, 1, 1, x.shape[-1]), [2, 3], True)
    return pooled.reshape(*x.shape[:-1], 1)


def _unsqueeze(x: torch.Tensor, dim: int) -> Any:
    dim = dim % (x.dim() + 1)
    if dim == x.dim():
        return NotImplemented
    return x.reshape(*x.shape[:dim], 1, *x.shape[dim:])


def _attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Any:
    plain = attn_mask is not None and attn_mask.dtype == query.dtype and not is_causal and dropout_p == 0.0
    if not (plain and query.dtype == torch.float32 and query.dim() == 4):
        return NotImplemented
    batch, heads, length, head_dim = query.shape
    kv_heads, keys = key.shape[1], key.shape[2]
    scale = 1.0 / math.sqrt(head_dim) if scale is None else scale
    grouped = query.reshape(batch * kv_heads, heads // kv_heads * length, head_dim)
    scores = torch.bmm(grouped, key.reshape(batch * kv_heads, keys, head_dim).transpose(1, 2))
    scores = scores.reshape(batch, heads, length, keys) * scale + attn_mask
    weights = torch.softmax(scores.clamp(min=torch.finfo(scores.dtype).min), dim=-1)
    grouped = weights.reshape(batch * kv_heads, heads // kv_heads * length, keys)
    attended = torch.bmm(grouped, value.reshape(batch * kv_heads, keys, head_dim))
    return attended.reshape(batch, heads, length, head_dim)


LOWERING_DECOMPOSITIONS = {
    aten.gelu.default: _gelu,
    aten.pow.Tensor_Scalar: _pow,
    aten.mean.dim: _mean,
    aten.unsqueeze.default: _unsqueeze,
    aten.scaled_dot_product_attention.default: _attention,
}
