"""The host-side stages a port may expose: what an NPU deployment builds on the CPU for its graphs
(decode masks and RoPE, the additive mask value, the K/V caches with their shared-KV bookkeeping,
the static inputs) and the graphs it exports. Each is optional: the default raises
:class:`~.base.NotExposed`, and each is judged by one check group of ``verify`` that names it in the
coverage line (``decode-masks``, ``mask-value``, ``KV cache``, ``static inputs``, ``export``).

Conventions are HF's, so no check converts: a port maps its own layout back at the edge (a cache
slot to the absolute position it holds, a pre-negated sine table to HF's rotate-half one)."""

from __future__ import annotations

from typing import Any

import torch

from ..export import StageCase


class HostStages:
    """The optional host-side stages of :class:`~.base.Gemma4Port` (mixed into it: ``_missing`` is
    the port's ``NotExposed`` naming the stage)."""

    def decode_masks(self, attention_mask: torch.Tensor) -> dict[str, torch.Tensor]:
        """The masks of the decode step after a conversation laid out as ``attention_mask (B, P +
        1)`` (0/1: its ``P`` tokens, then the new one at position ``P``), as the port builds them:
        ``{layer_type: (B, K) bool}``, ``True`` where the new token attends absolute position ``k``
        (``K >= P + 1``; entries past ``P`` are slots nothing was written to, which must stay False)."""
        raise self._missing("decode masks")

    def decode_rope(self, position: int, dtype: torch.dtype) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """The RoPE tables the port builds for a decode step at ``position``: ``{layer_type: (cos,
        sin)}``, each ``(1, 1, head_dim)`` in ``dtype``, in HF's rotate-half layout."""
        raise self._missing("decode RoPE")

    def mask_fill_value(self) -> float:
        """The additive value the port's masks put on a forbidden key (added to the score before the
        softmax, as HF's eager masks are)."""
        raise self._missing("its additive mask value")

    def cache_kv(self, row: int, positions: list[int]) -> dict[int, tuple[torch.Tensor, torch.Tensor]]:
        """What the port's cache holds for row ``row`` of its conversation at absolute ``positions``:
        ``{layer: (K, V)}``, each ``(kv_heads, len(positions), head_dim)``, after RoPE on K as HF's
        cache holds them. Every producing layer; a KV-shared layer where the port keeps a cache for
        it (then what that layer attends to: its producer's K/V)."""
        raise self._missing("its KV cache")

    def static_inputs(self, prompt: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """The ids its graphs take for ``prompt`` (:class:`~.prompt.Prompt`) and which positions are
        real tokens: ``(ids (B, N), valid (B, N) bool)`` at its static length ``N``, placeholders
        mapped as its host side maps them."""
        raise self._missing("its static inputs")

    def export_cases(self) -> list[StageCase]:
        """The graphs the port exports (:class:`~gemma4_static.export.StageCase`: name, module and the
        inputs of one real call each, e.g. captured in its last prefill and decode step); each is
        exported with ``torch.export`` and must replay its eager output."""
        raise self._missing("its export modules")


def appended_to_absolute(slots: torch.Tensor, past: int) -> torch.Tensor:
    """Decode masks ``(B, K)`` of a port whose decode attends its past storage (slot ``p`` holding
    position ``p``) then the new token in the last slot, over absolute positions: the new token's slot
    at ``past``, the storage slot ``past`` (nothing written there yet) moved to the end."""
    storage, current = slots[:, :-1], slots[:, -1:]
    return torch.cat((storage[:, :past], current, storage[:, past + 1 :], storage[:, past : past + 1]), dim=1)
