"""Mask rules as predicates over broadcastable grids of query positions ``q`` and key slots ``k``,
one table from layer type to rule (as HF's layer-pattern map), and the vision-block overlay."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch

from ..spec import FULL_ATTENTION, SLIDING_ATTENTION, TextConfigView

VISION_TOKEN_TYPES = (1, 2)  # image and video soft tokens, as in HF's mm_token_type_ids
Rule = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def causal(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """A query sees itself and earlier keys."""
    return k <= q


def within_window(q: torch.Tensor, k: torch.Tensor, window: int) -> torch.Tensor:
    """HF's sliding overlay: the window includes the current token (``window`` keys up to ``q``)."""
    return k > q - window


def within_symmetric_window(q: torch.Tensor, k: torch.Tensor, window: int) -> torch.Tensor:
    """HF's bidirectional sliding rule (``window`` is HF's already-halved value)."""
    return (q - k).abs() <= window


def every_key(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """An encoder's full attention: no position rule."""
    return torch.ones(torch.broadcast_shapes(q.shape, k.shape), dtype=torch.bool)


def causal_within_window(q: torch.Tensor, k: torch.Tensor, window: int) -> torch.Tensor:
    return causal(q, k) & within_window(q, k, window)


def layer_rules(view: TextConfigView) -> dict[str, Rule]:
    """The position rule of each layer type of ``view`` (no padding, no vision overlay)."""
    window = view.sliding_window
    if view.use_bidirectional_attention == "all":
        rules = {FULL_ATTENTION: every_key, SLIDING_ATTENTION: partial(within_symmetric_window, window=window)}
    else:
        rules = {FULL_ATTENTION: causal, SLIDING_ATTENTION: partial(causal_within_window, window=window)}
    return {name: rules[name] for name in view.unique_layer_types}


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
