"""The host-side stages a port may expose: what an NPU deployment builds on the CPU for its graphs
(prefill and decode masks, RoPE tables, the additive mask value, the token embedding, the K/V caches
with their shared-KV bookkeeping, the static inputs). Each is optional and a capability of its own:
the default raises :class:`~..core.NotExposed`, and the check groups that read it say so in their
``needs`` or ``reads``.

Conventions are HF's, so no check converts: a port maps its own layout back at the edge (a cache
slot to the absolute position it holds, a pre-negated sine table to HF's rotate-half one)."""

from __future__ import annotations

from typing import Any

import torch

from ..core import not_exposed
from . import Capability


class HostStages:
    """The optional host-side stages of :class:`~..port.Gemma4Port`."""

    def prefill_masks(
        self, attention_mask: torch.Tensor, mm_token_type_ids: torch.Tensor | None = None
    ) -> dict[str, torch.Tensor]:
        """``{layer_type: (B, 1, S, S) bool}`` for a 0/1 ``attention_mask (B, S)`` (and, on a model
        with vision-bidirectional attention, ``mm_token_type_ids (B, S)``: 1 on image placeholders)."""
        raise not_exposed(self, PREFILL_MASKS.name)

    def rope(self, position_ids: torch.Tensor, dtype: torch.dtype) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """``{layer_type: (cos, sin)}``, each ``(B, S, head_dim)`` in ``dtype``, for ``position_ids (B, S)``."""
        raise not_exposed(self, ROPE.name)

    def token_embedding(self, input_ids: torch.Tensor) -> torch.Tensor:
        """The scaled token embedding ``(B, S, H)`` of ``input_ids (B, S)``."""
        raise not_exposed(self, TOKEN_EMBEDDING.name)

    def decode_masks(self, attention_mask: torch.Tensor) -> dict[str, torch.Tensor]:
        """The masks of the decode step after a conversation laid out as ``attention_mask (B, P +
        1)`` (0/1: its ``P`` tokens, then the new one at position ``P``), as the port builds them:
        ``{layer_type: (B, K) bool}``, ``True`` where the new token attends absolute position ``k``
        (``K >= P + 1``; entries past ``P`` are slots nothing was written to, which must stay False)."""
        raise not_exposed(self, DECODE_MASKS.name)

    def decode_rope(self, position: int, dtype: torch.dtype) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """The RoPE tables the port builds for a decode step at ``position``: ``{layer_type: (cos,
        sin)}``, each ``(1, 1, head_dim)`` in ``dtype``, in HF's rotate-half layout."""
        raise not_exposed(self, DECODE_ROPE.name)

    def mask_fill_value(self) -> float:
        """The additive value the port's masks put on a forbidden key (added to the score before the
        softmax, as HF's eager masks are)."""
        raise not_exposed(self, MASK_VALUE.name)

    def cache_kv(self, row: int, positions: list[int]) -> dict[int, tuple[torch.Tensor, torch.Tensor]]:
        """What the port's cache holds for row ``row`` of its conversation at absolute ``positions``:
        ``{layer: (K, V)}``, each ``(kv_heads, len(positions), head_dim)``, after RoPE on K as HF's
        cache holds them. Every producing layer; a KV-shared layer where the port keeps a cache for
        it (then what that layer attends to: its producer's K/V)."""
        raise not_exposed(self, KV_CACHE.name)

    def static_inputs(self, prompt: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """The ids its graphs take for ``prompt`` (:class:`~.prompt.Prompt`) and which positions are
        real tokens: ``(ids (B, N), valid (B, N) bool)`` at its static length ``N``, placeholders
        mapped as its host side maps them."""
        raise not_exposed(self, STATIC_INPUTS.name)


MIXIN = HostStages
PREFILL_MASKS = Capability("prefill masks", HostStages, ("prefill_masks",))
ROPE = Capability("RoPE tables", HostStages, ("rope",))
TOKEN_EMBEDDING = Capability("the token embedding", HostStages, ("token_embedding",))
DECODE_MASKS = Capability("decode masks", HostStages, ("decode_masks",), coverage="masks decode")
DECODE_ROPE = Capability("decode RoPE", HostStages, ("decode_rope",), coverage="RoPE decode")
MASK_VALUE = Capability("its additive mask value", HostStages, ("mask_fill_value",), coverage="mask value")
KV_CACHE = Capability("its KV cache", HostStages, ("cache_kv",), coverage="KV cache")
STATIC_INPUTS = Capability("its static inputs", HostStages, ("static_inputs",), coverage="static inputs")
CAPABILITIES = (PREFILL_MASKS, ROPE, TOKEN_EMBEDDING, DECODE_MASKS, DECODE_ROPE, MASK_VALUE, KV_CACHE, STATIC_INPUTS)


def appended_to_absolute(slots: torch.Tensor, past: int) -> torch.Tensor:
    """Decode masks ``(B, K)`` of a port whose decode attends its past storage (slot ``p`` holding
    position ``p``) then the new token in the last slot, over absolute positions: the new token's slot
    at ``past``, the storage slot ``past`` (nothing written there yet) moved to the end."""
    storage, current = slots[:, :-1], slots[:, -1:]
    return torch.cat((storage[:, :past], current, storage[:, past + 1 :], storage[:, past : past + 1]), dim=1)
