"""Tensor ops the stages share: Gemma 4 RMSNorm, RoPE rotation, tanh-approximated GELU."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None, eps: float) -> torch.Tensor:
    """Gemma 4 RMSNorm: in fp32, ``x * (mean(x**2) + eps) ** -0.5 * weight``, cast back to ``x``'s dtype.

    Eager: ``torch.rms_norm``, one fused kernel (a decode step runs eight norms a layer; its result
    equals the explicit ops' in fp32 on these widths). Exported (a stage program): the explicit ops,
    which XNNPACK takes."""
    if not torch.compiler.is_exporting():
        scale = None if weight is None else weight.float()
        return torch.rms_norm(x.float(), (x.shape[-1],), scale, eps).type_as(x)
    x32 = x.float()
    normed = x32 * torch.pow(x32.pow(2).mean(-1, keepdim=True) + eps, -0.5)
    if weight is not None:
        normed = normed * weight.float()
    return normed.type_as(x)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """``[x1, x2] -> [-x2, x1]`` on the last dim (HF's halves-concatenated RoPE layout)."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x`` ``(B, S, heads, D)`` by ``cos``/``sin`` ``(B, S, D)`` (halves concatenated)."""
    cos, sin = cos[:, :, None, :], sin[:, :, None, :]
    return x * cos + rotate_half(x) * sin


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")
