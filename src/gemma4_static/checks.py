"""Argument checks shared by the CPU-side builders: each raises a message naming the argument."""

from __future__ import annotations

from typing import Any

import torch


def floating_dtype(dtype: Any, name: str = "dtype") -> torch.dtype:
    """Return ``dtype`` if it is a floating ``torch.dtype``; ``TypeError`` otherwise."""
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"{name} must be a floating torch.dtype (e.g. torch.float32), got {dtype!r}")
    return dtype


def valid_token_mask(mask: Any, name: str = "attention_mask") -> torch.Tensor:
    """Return ``mask`` as a boolean ``(B, S)`` tensor, ``True`` = valid token.

    Accepts ``torch.bool`` or an integer tensor holding only 0 and 1 (what tokenizers return).
    """
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of shape (B, S), got {type(mask).__name__}")
    if mask.dim() != 2:
        raise ValueError(f"{name} must have shape (B, S), got shape {tuple(mask.shape)}")
    if mask.shape[0] == 0 or mask.shape[1] == 0:
        raise ValueError(f"{name} must not be empty, got shape {tuple(mask.shape)}")
    if mask.dtype == torch.bool:
        return mask
    if mask.dtype.is_floating_point or mask.dtype.is_complex:
        raise TypeError(f"{name} must be boolean (or integer 0/1), got dtype {mask.dtype}")
    if ((mask != 0) & (mask != 1)).any():
        bad = sorted(set(mask.unique().tolist()) - {0, 1})
        raise ValueError(f"{name} must hold only 0 and 1, got values {bad[:5]}")
    return mask.bool()


def mask_fill_value(mask_value: float | None, dtype: torch.dtype) -> float:
    """The additive value for forbidden positions: ``torch.finfo(dtype).min`` unless given."""
    if mask_value is None:
        return torch.finfo(dtype).min
    if not isinstance(mask_value, int | float) or isinstance(mask_value, bool):
        raise TypeError(f"mask_value must be a number or None, got {type(mask_value).__name__}")
    if not mask_value < 0:
        raise ValueError(f"mask_value must be negative (it is added to forbidden scores), got {mask_value!r}")
    if mask_value != float("-inf") and mask_value < torch.finfo(dtype).min:
        raise ValueError(
            f"mask_value={mask_value!r} is below the range of {dtype} (min {torch.finfo(dtype).min}); "
            "it would overflow to -inf"
        )
    return float(mask_value)


def position_ids_2d(position_ids: Any, name: str = "position_ids") -> torch.Tensor:
    """Return integer positions as ``(B, S)``; a ``(S,)`` tensor becomes ``(1, S)``."""
    if not isinstance(position_ids, torch.Tensor):
        raise TypeError(
            f"{name} must be an integer torch.Tensor of shape (B, S) or (S,), got {type(position_ids).__name__}"
        )
    if position_ids.dtype.is_floating_point or position_ids.dtype in (
        torch.bool,
        torch.complex64,
        torch.complex128,
    ):
        raise TypeError(f"{name} must hold integers, got dtype {position_ids.dtype}")
    if position_ids.dim() == 1:
        position_ids = position_ids.unsqueeze(0)
    if position_ids.dim() != 2 or position_ids.numel() == 0:
        raise ValueError(f"{name} must have non-empty shape (B, S) or (S,), got shape {tuple(position_ids.shape)}")
    if (position_ids < 0).any():
        raise ValueError(f"{name} must be non-negative, got min {int(position_ids.min())}")
    return position_ids.long()
