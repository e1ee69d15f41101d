"""Attention masks per layer type, for prefill, chunks and decode over a static cache.

Each layer type has one position rule (:func:`layer_rules`, as HF's layer-pattern map), evaluated
once over a ``(size, size)`` grid of query positions and key slots (:class:`MaskTable`); the mask
of any set of queries is rows of that table, as gpt-fast slices its precomputed causal mask. Key
padding is applied on columns only (padded query rows keep their pattern and are discarded
downstream), exactly as HF's ``masking_utils`` does. Boolean masks use ``True`` = allowed;
additive masks use ``0.0`` = allowed and ``mask_value`` (default per dtype, ``default_mask_value``) =
forbidden.

Rules per layer type:

- ``full_attention``: ``k <= q`` (``"all"``: every key).
- ``sliding_attention``: ``k <= q and k > q - window``; with ``"vision"`` and token types given,
  ``k > q - window and (k <= q or same vision block)``; with ``"all"``: ``abs(q - k) <= window``.

The public ``build_*`` functions validate their arguments; the runtime holds a :class:`MaskTable`
and slices it without re-validating what it built itself.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import torch

from ..spec import SLIDING_ATTENTION, TextConfigView, read_text_config
from .checks import (
    decode_positions,
    floating_dtype,
    mask_fill_value,
    query_positions,
    token_type_ids,
    valid_token_mask,
)
from .rules import layer_rules, same_vision_block, vision_block_ids, within_window


def to_additive(
    mask: torch.Tensor, *, dtype: torch.dtype = torch.float32, mask_value: float | None = None
) -> torch.Tensor:
    """Boolean mask (``True`` = allowed) to additive: ``0.0`` allowed, ``mask_value`` forbidden."""
    dtype = floating_dtype(dtype)
    fill = mask_fill_value(mask_value, dtype)
    return torch.where(mask, torch.zeros((), dtype=dtype), torch.tensor(fill, dtype=dtype))


class MaskTable:
    """Each layer type's rule over ``(size, size)`` (query position, key slot), built once
    (``size**2`` bytes per layer type); masks are rows of it, padded on keys.

    ``valid`` is the ``(B, size)`` valid-slot mask, ``positions`` the ``(B, C)`` query positions
    (``None``: every position, a prefill), ``blocks`` the ``(B, size)`` vision block ids from
    :meth:`vision_blocks` (``None``: no overlay). Arguments are trusted, not validated.
    """

    def __init__(self, view: TextConfigView, size: int) -> None:
        self.view, self.size = view, size
        grid = torch.arange(size)
        self.rules = {name: rule(grid[:, None], grid[None, :]) for name, rule in layer_rules(view).items()}

    def vision_blocks(self, mm_token_type_ids: torch.Tensor | None) -> torch.Tensor | None:
        """Block ids for the vision overlay, or ``None`` where HF ignores token types (any mode but ``"vision"``)."""
        if mm_token_type_ids is None or self.view.use_bidirectional_attention != "vision":
            return None
        return vision_block_ids(mm_token_type_ids)

    def bool_masks(
        self, valid: torch.Tensor, positions: torch.Tensor | None = None, blocks: torch.Tensor | None = None
    ) -> dict[str, torch.Tensor]:
        """``{layer_type: (B, 1, C, size)}`` boolean masks, ``True`` = allowed, over key slots = positions."""
        slots = torch.arange(self.size).expand_as(valid)
        queries = slots if positions is None else positions
        keys = torch.where(valid, slots, -1)
        return self.masks_at(queries, dict.fromkeys(self.rules, keys), blocks)

    def masks_at(
        self, positions: torch.Tensor, key_positions: dict[str, torch.Tensor], blocks: torch.Tensor | None = None
    ) -> dict[str, torch.Tensor]:
        """``{layer_type: (B, 1, C, K)}`` boolean masks for queries at ``positions (B, C)`` over keys
        holding the absolute positions ``key_positions[layer_type] (B, K)`` (``-1`` = an empty slot),
        whatever slot each key sits in (a ring cache's slots wrap; the positions decide)."""
        masks = {}
        for name, rule in self.rules.items():
            keys = key_positions[name]
            held = (keys >= 0)[:, None, :]
            clamped = keys.clamp(min=0)
            mask = rule[positions[:, :, None], clamped[:, None, :]] & held
            if blocks is not None and name == SLIDING_ATTENTION:
                in_window = within_window(positions[:, :, None], clamped[:, None, :], self.view.sliding_window)
                same_block = same_vision_block(blocks.gather(1, positions), blocks.gather(1, clamped))
                mask = mask | (in_window & same_block & held)
            masks[name] = mask[:, None]
        return masks

    def additive_masks(
        self,
        valid: torch.Tensor,
        positions: torch.Tensor | None = None,
        blocks: torch.Tensor | None = None,
        *,
        dtype: torch.dtype,
        fill: float,
    ) -> dict[str, torch.Tensor]:
        """``{layer_type: (B, 1, C, size)}`` additive masks; without an overlay one pass
        ``minimum(rule rows, key padding)`` over a cached additive table."""
        if blocks is not None:
            return {
                name: to_additive(mask, dtype=dtype, mask_value=fill)
                for name, mask in self.bool_masks(valid, positions, blocks).items()
            }
        key_padding = to_additive(valid, dtype=dtype, mask_value=fill)[:, None, None, :]
        masks = {}
        for name, table in additive_rules(self, dtype, fill).items():
            rows = table if positions is None else table[positions][:, None]
            masks[name] = torch.minimum(rows, key_padding)
        return masks


@lru_cache(maxsize=16)
def mask_table(view: TextConfigView, size: int) -> MaskTable:
    """The :class:`MaskTable` of ``view`` over ``size`` slots, built once and shared (never mutated)."""
    return MaskTable(view, size)


@lru_cache(maxsize=16)
def additive_rules(table: MaskTable, dtype: torch.dtype, fill: float) -> dict[str, torch.Tensor]:
    """``{layer_type: (size, size)}`` additive rule tables of ``table`` (built once per dtype and fill)."""
    return {name: to_additive(rule, dtype=dtype, mask_value=fill) for name, rule in table.rules.items()}


def _prepare(
    text_config: Any, attention_mask: Any, mm_token_type_ids: Any = None
) -> tuple[MaskTable, torch.Tensor, torch.Tensor | None]:
    """Validated arguments: the shared table, the ``(B, K)`` bool valid mask and the vision block ids."""
    view = read_text_config(text_config)
    valid = valid_token_mask(attention_mask)
    table = mask_table(view, valid.shape[1])
    types = None if mm_token_type_ids is None else token_type_ids(mm_token_type_ids, valid)
    return table, valid, table.vision_blocks(types)


def _decode_query(table: MaskTable, valid: torch.Tensor, position: Any) -> torch.Tensor:
    if table.view.use_bidirectional_attention == "all":
        raise ValueError(
            "text_config.use_bidirectional_attention='all' describes an encoder: decode masks are undefined"
        )
    return decode_positions(position, valid)[:, None]


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
    table, valid, blocks = _prepare(text_config, attention_mask, mm_token_type_ids)
    return table.bool_masks(valid, None, blocks)


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
    table, valid, blocks = _prepare(text_config, attention_mask, mm_token_type_ids)
    return table.bool_masks(valid, query_positions(positions, valid), blocks)


def build_decode_bool_masks(
    text_config: Any, attention_mask: torch.Tensor, position: int | torch.Tensor
) -> dict[str, torch.Tensor]:
    """Boolean decode masks ``{layer_type: (B, 1, 1, max_seq)}``, ``True`` = allowed.

    ``attention_mask`` is the ``(B, max_seq)`` valid-slot mask of the static cache *after* the new
    token was written; ``position`` (int, or ``(B,)`` integer tensor) is the new token's absolute
    position, which is also its cache slot, and that slot must be valid. Row ``b`` equals row
    ``position[b]`` of the prefill mask over ``max_seq`` tokens.
    """
    table, valid, _ = _prepare(text_config, attention_mask)
    return table.bool_masks(valid, _decode_query(table, valid, position))


def _fill(dtype: Any, mask_value: Any) -> tuple[torch.dtype, float]:
    dtype = floating_dtype(dtype)
    return dtype, mask_fill_value(mask_value, dtype)


def build_prefill_masks(
    text_config: Any,
    attention_mask: torch.Tensor,
    *,
    dtype: torch.dtype = torch.float32,
    mask_value: float | None = None,
    mm_token_type_ids: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """Additive prefill masks ``{layer_type: (B, 1, S, S)}`` (see :func:`build_prefill_bool_masks`)."""
    dtype, fill = _fill(dtype, mask_value)
    table, valid, blocks = _prepare(text_config, attention_mask, mm_token_type_ids)
    return table.additive_masks(valid, None, blocks, dtype=dtype, fill=fill)


def build_decode_masks(
    text_config: Any,
    attention_mask: torch.Tensor,
    position: int | torch.Tensor,
    *,
    dtype: torch.dtype = torch.float32,
    mask_value: float | None = None,
) -> dict[str, torch.Tensor]:
    """Additive decode masks ``{layer_type: (B, 1, 1, max_seq)}`` (see :func:`build_decode_bool_masks`)."""
    dtype, fill = _fill(dtype, mask_value)
    table, valid, _ = _prepare(text_config, attention_mask)
    return table.additive_masks(valid, _decode_query(table, valid, position), dtype=dtype, fill=fill)


def build_chunk_masks(
    text_config: Any,
    attention_mask: torch.Tensor,
    positions: torch.Tensor,
    *,
    mm_token_type_ids: torch.Tensor | None = None,
    dtype: torch.dtype = torch.float32,
    mask_value: float | None = None,
) -> dict[str, torch.Tensor]:
    """Additive chunk masks ``{layer_type: (B, 1, C, max_seq)}`` (see :func:`build_chunk_bool_masks`)."""
    dtype, fill = _fill(dtype, mask_value)
    table, valid, blocks = _prepare(text_config, attention_mask, mm_token_type_ids)
    return table.additive_masks(valid, query_positions(positions, valid), blocks, dtype=dtype, fill=fill)
