"""Attention masks per layer type, for prefill and for one decode step over a static cache.

Rules are small predicates over index grids (``q`` query positions, ``k`` key slots), combined
once; key padding is applied on columns only (padded query rows keep their pattern and are
discarded downstream), exactly as HF's ``masking_utils`` does. Boolean masks use ``True`` =
allowed; additive masks use ``0.0`` = allowed and ``mask_value`` (default
``torch.finfo(dtype).min``) = forbidden.

Rules per layer type:

- ``full_attention``: ``k <= q`` (``"all"``: every key).
- ``sliding_attention``: ``k <= q and k > q - window``; with ``"vision"`` and token types given,
  ``k > q - window and (k <= q or same vision block)``; with ``"all"``: ``abs(q - k) <= window``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import torch

from .checks import floating_dtype, mask_fill_value, valid_token_mask
from .config import FULL_ATTENTION, TextConfigView, read_text_config

VISION_TOKEN_TYPES = (1, 2)  # image and video soft tokens, as in HF's mm_token_type_ids


def causal(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """A query sees itself and earlier keys."""
    return k <= q


def within_window(q: torch.Tensor, k: torch.Tensor, window: int) -> torch.Tensor:
    """HF's sliding overlay: the window includes the current token (``window`` keys up to ``q``)."""
    return k > q - window


def within_symmetric_window(q: torch.Tensor, k: torch.Tensor, window: int) -> torch.Tensor:
    """HF's bidirectional sliding rule (``window`` is HF's already-halved value)."""
    return (q - k).abs() <= window


def layer_rule(q: torch.Tensor, k: torch.Tensor, view: TextConfigView, layer_type: str) -> torch.Tensor:
    """The position rule of ``layer_type`` on broadcastable grids ``q``, ``k`` (no padding, no vision)."""
    window = view.sliding_window
    if view.use_bidirectional_attention == "all":
        if layer_type == FULL_ATTENTION:
            return torch.ones(torch.broadcast_shapes(q.shape, k.shape), dtype=torch.bool)
        return within_symmetric_window(q, k, window)
    if layer_type == FULL_ATTENTION:
        return causal(q, k)
    return causal(q, k) & within_window(q, k, window)


@lru_cache(maxsize=16)
def _square_rule(view: TextConfigView, layer_type: str, size: int) -> torch.Tensor:
    """``layer_rule`` over a ``(size, size)`` grid, built once and reused (never mutated)."""
    positions = torch.arange(size)
    return layer_rule(positions[:, None], positions[None, :], view, layer_type)


def vision_block_ids(mm_token_type_ids: torch.Tensor) -> torch.Tensor:
    """``(B, S)`` id of the contiguous vision block each token belongs to, ``-1`` for text."""
    is_vision = torch.isin(mm_token_type_ids, torch.tensor(VISION_TOKEN_TYPES))
    starts = is_vision.clone()
    starts[:, 1:] &= ~is_vision[:, :-1]
    return torch.where(is_vision, starts.long().cumsum(dim=1) - 1, -1)


def same_vision_block(query_blocks: torch.Tensor, key_blocks: torch.Tensor) -> torch.Tensor:
    """``(B, Q, K)``: the query (block ids ``(B, Q)``) and key (``(B, K)``) lie in the same vision block."""
    q_block = query_blocks[:, :, None]
    return (q_block == key_blocks[:, None, :]) & (q_block >= 0)


def build_prefill_bool_masks(
    text_config: Any, attention_mask: torch.Tensor, *, mm_token_type_ids: torch.Tensor | None = None
) -> dict[str, torch.Tensor]:
    """Boolean prefill masks ``{layer_type: (B, 1, S, S)}``, ``True`` = allowed.

    ``attention_mask`` is the ``(B, S)`` valid-token mask (bool, or integer 0/1); any layout
    (right, left, holes) is accepted. With ``use_bidirectional_attention == "vision"`` and
    ``mm_token_type_ids`` given (``(B, S)``, 1/2 = image/video token), sliding layers also allow
    attention within the same contiguous vision block; otherwise ``mm_token_type_ids`` is unused,
    as in HF.
    """
    view = read_text_config(text_config)
    valid = valid_token_mask(attention_mask)
    size = valid.shape[1]
    if _vision_overlay(view, mm_token_type_ids, valid):
        positions = torch.arange(size).expand(valid.shape[0], size)
        return build_chunk_bool_masks(view, valid, positions, mm_token_type_ids=mm_token_type_ids)
    return {
        layer_type: _square_rule(view, layer_type, size) & valid[:, None, None, :]
        for layer_type in view.unique_layer_types
    }


def build_chunk_bool_masks(
    text_config: Any,
    attention_mask: torch.Tensor,
    positions: torch.Tensor,
    *,
    mm_token_type_ids: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """Boolean masks ``{layer_type: (B, 1, C, max_seq)}`` for a chunk of queries over a static cache.

    ``positions`` ``(B, C)`` are the queries' absolute positions (= cache slots); ``attention_mask``
    ``(B, max_seq)`` marks the valid slots after the chunk was written. Padding is masked on keys
    only. ``mm_token_type_ids`` ``(B, max_seq)`` adds the vision-block overlay as in prefill.
    """
    view = read_text_config(text_config)
    valid = valid_token_mask(attention_mask)
    positions = _query_positions(positions, valid)
    slots = torch.arange(valid.shape[1])
    q, k = positions[:, :, None], slots[None, None, :]
    blocks = vision_block_ids(mm_token_type_ids) if _vision_overlay(view, mm_token_type_ids, valid) else None
    masks = {}
    for layer_type in view.unique_layer_types:
        if blocks is not None and layer_type != FULL_ATTENTION:
            same_block = same_vision_block(blocks.gather(1, positions), blocks)
            rule = within_window(q, k, view.sliding_window) & (causal(q, k) | same_block)
        else:
            rule = layer_rule(q, k, view, layer_type)
        masks[layer_type] = (rule & valid[:, None, :])[:, None]
    return masks


def build_decode_bool_masks(
    text_config: Any, attention_mask: torch.Tensor, position: int | torch.Tensor
) -> dict[str, torch.Tensor]:
    """Boolean decode masks ``{layer_type: (B, 1, 1, max_seq)}``, ``True`` = allowed.

    ``attention_mask`` is the ``(B, max_seq)`` valid-slot mask of the static cache *after* the new
    token was written; ``position`` (int, or ``(B,)`` integer tensor) is the new token's absolute
    position, which is also its cache slot, and that slot must be valid. Row ``b`` equals row
    ``position[b]`` of the prefill mask over ``max_seq`` tokens.
    """
    view = read_text_config(text_config)
    if view.use_bidirectional_attention == "all":
        raise ValueError(
            "text_config.use_bidirectional_attention='all' describes an encoder: decode masks are undefined"
        )
    valid = valid_token_mask(attention_mask)
    return build_chunk_bool_masks(view, valid, _decode_positions(position, valid)[:, None])


def to_additive(
    mask: torch.Tensor, *, dtype: torch.dtype = torch.float32, mask_value: float | None = None
) -> torch.Tensor:
    """Boolean mask (``True`` = allowed) to additive: ``0.0`` allowed, ``mask_value`` forbidden."""
    dtype = floating_dtype(dtype)
    fill = mask_fill_value(mask_value, dtype)
    return torch.where(mask, torch.zeros((), dtype=dtype), torch.tensor(fill, dtype=dtype))


@lru_cache(maxsize=16)
def _square_rule_additive(
    view: TextConfigView, layer_type: str, size: int, dtype: torch.dtype, fill: float
) -> torch.Tensor:
    """Additive form of :func:`_square_rule`, built once per dtype and fill value."""
    return to_additive(_square_rule(view, layer_type, size), dtype=dtype, mask_value=fill)


def build_prefill_masks(
    text_config: Any,
    attention_mask: torch.Tensor,
    *,
    dtype: torch.dtype = torch.float32,
    mask_value: float | None = None,
    mm_token_type_ids: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """Additive prefill masks ``{layer_type: (B, 1, S, S)}`` (see :func:`build_prefill_bool_masks`).

    Without a vision overlay each mask is one pass over a cached additive rule table:
    ``minimum(rule, key_padding)`` equals ``0.0`` exactly where both allow.
    """
    view = read_text_config(text_config)
    fill = mask_fill_value(mask_value, floating_dtype(dtype))
    valid = valid_token_mask(attention_mask)
    if _vision_overlay(view, mm_token_type_ids, valid):
        masks = build_prefill_bool_masks(view, valid, mm_token_type_ids=mm_token_type_ids)
        return _additive(masks, dtype, fill)
    key_padding = to_additive(valid, dtype=dtype, mask_value=fill)[:, None, None, :]
    size = valid.shape[1]
    return {
        name: torch.minimum(_square_rule_additive(view, name, size, dtype, fill), key_padding)
        for name in view.unique_layer_types
    }


def build_decode_masks(
    text_config: Any,
    attention_mask: torch.Tensor,
    position: int | torch.Tensor,
    *,
    dtype: torch.dtype = torch.float32,
    mask_value: float | None = None,
) -> dict[str, torch.Tensor]:
    """Additive decode masks ``{layer_type: (B, 1, 1, max_seq)}`` (see :func:`build_decode_bool_masks`)."""
    fill = mask_fill_value(mask_value, floating_dtype(dtype))
    return _additive(build_decode_bool_masks(text_config, attention_mask, position), dtype, fill)


def build_chunk_masks(
    text_config: Any,
    attention_mask: torch.Tensor,
    positions: torch.Tensor,
    *,
    dtype: torch.dtype = torch.float32,
    mask_value: float | None = None,
    mm_token_type_ids: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """Additive chunk masks ``{layer_type: (B, 1, C, max_seq)}`` (see :func:`build_chunk_bool_masks`)."""
    fill = mask_fill_value(mask_value, floating_dtype(dtype))
    masks = build_chunk_bool_masks(text_config, attention_mask, positions, mm_token_type_ids=mm_token_type_ids)
    return _additive(masks, dtype, fill)


def _additive(masks: dict[str, torch.Tensor], dtype: torch.dtype, fill: float) -> dict[str, torch.Tensor]:
    return {name: to_additive(mask, dtype=dtype, mask_value=fill) for name, mask in masks.items()}


def _vision_overlay(view: TextConfigView, mm_token_type_ids: Any, valid: torch.Tensor) -> bool:
    """Whether the vision-block overlay applies; checks ``mm_token_type_ids`` whenever given (HF
    ignores them outside ``use_bidirectional_attention == "vision"``, and so do we)."""
    if mm_token_type_ids is None:
        return False
    _check_token_types(mm_token_type_ids, valid)
    return view.use_bidirectional_attention == "vision"


def _check_token_types(mm_token_type_ids: Any, valid: torch.Tensor) -> torch.Tensor:
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


def _query_positions(positions: Any, valid: torch.Tensor) -> torch.Tensor:
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


def _decode_positions(position: Any, valid: torch.Tensor) -> torch.Tensor:
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
