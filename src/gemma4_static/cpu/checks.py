"""Argument checks of the CPU-side public entry points: each raises a message naming the argument."""

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


# fp32 and bf16 (fp32's exponent range): finfo.min as HF uses, any score added stays finite. fp16:
# finfo.min (-65504) plus a score below -16 overflows to -inf in fp16 arithmetic (an NPU adder), and
# a fully masked row of -inf is NaN; -30000 leaves 35000 of headroom and still zeroes every masked
# weight (exp(-30000 + any score of a normed q.k) underflows in every dtype).
FP16_MASK_VALUE = -30000.0


def default_mask_value(dtype: torch.dtype) -> float:
    """The additive value for forbidden positions in ``dtype`` when none is given."""
    return FP16_MASK_VALUE if dtype == torch.float16 else torch.finfo(dtype).min


def mask_fill_value(mask_value: float | None, dtype: torch.dtype) -> float:
    """The additive value for forbidden positions: :func:`default_mask_value` unless given."""
    if mask_value is None:
        return default_mask_value(dtype)
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


def token_type_ids(mm_token_type_ids: Any, valid: torch.Tensor) -> torch.Tensor:
    """``mm_token_type_ids`` as an integer tensor of the valid mask's ``(B, S)`` shape."""
    if not isinstance(mm_token_type_ids, torch.Tensor):
        raise TypeError(f"mm_token_type_ids must be a torch.Tensor, got {type(mm_token_type_ids).__name__}")
    if mm_token_type_ids.shape != valid.shape:
        raise ValueError(
            f"mm_token_type_ids must have the attention_mask's shape {tuple(valid.shape)}, "
            f"got {tuple(mm_token_type_ids.shape)}"
        )
    if mm_token_type_ids.dtype.is_floating_point or mm_token_type_ids.dtype == torch.bool:
        raise TypeError(f"mm_token_type_ids must hold integers, got dtype {mm_token_type_ids.dtype}")
    return mm_token_type_ids


def query_positions(positions: Any, valid: torch.Tensor) -> torch.Tensor:
    """``(B, C)`` long query positions, each a slot of the ``(B, max_seq)`` cache."""
    batch, max_seq = valid.shape
    if not isinstance(positions, torch.Tensor) or positions.dtype.is_floating_point or positions.dtype == torch.bool:
        raise TypeError(f"positions must be an integer tensor of shape (B, C), got {positions!r}")
    if positions.dim() != 2 or positions.shape[0] != batch or positions.shape[1] == 0:
        raise ValueError(f"positions must have shape (B, C) with B = {batch}, got {tuple(positions.shape)}")
    if (positions < 0).any() or (positions >= max_seq).any():
        raise ValueError(
            f"positions must lie in [0, max_seq) = [0, {max_seq}), "
            f"got min {int(positions.min())}, max {int(positions.max())}"
        )
    return positions.long()


def decode_positions(position: Any, valid: torch.Tensor) -> torch.Tensor:
    """``(B,)`` long positions from an int or a ``(B,)`` tensor, each a valid slot of ``valid``."""
    batch, max_seq = valid.shape
    if isinstance(position, int) and not isinstance(position, bool):
        positions = torch.full((batch,), position, dtype=torch.long)
    elif isinstance(position, torch.Tensor) and not position.dtype.is_floating_point and position.dtype != torch.bool:
        if position.shape != (batch,):
            raise ValueError(
                f"position must be an int or a tensor of shape (B,) = ({batch},), got shape {tuple(position.shape)}"
            )
        positions = position.long()
    else:
        raise TypeError(f"position must be an int or an integer tensor of shape (B,), got {position!r}")
    if (positions < 0).any() or (positions >= max_seq).any():
        raise ValueError(f"position must lie in [0, max_seq) = [0, {max_seq}), got {positions.tolist()}")
    own_slot = valid.gather(1, positions[:, None]).squeeze(1)
    if not own_slot.all():
        rows = (~own_slot).nonzero().flatten().tolist()
        raise ValueError(
            "attention_mask must mark the new token's slot as valid: "
            f"rows {rows} have attention_mask[row, position] False"
        )
    return positions


def positive_int(value: Any, name: str) -> int:
    """``value`` if it is an ``int >= 1`` (not a bool); ``ValueError`` naming ``name`` otherwise."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value
