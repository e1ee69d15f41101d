"""One Gemma 4 decoder layer with explicit K/V in and out, for prefill, chunks and decode.

Computed with plain torch ops from the layer's weights (no HF attention, decoder-layer or model
``forward``). Shapes: ``B`` batch, ``S`` query length, ``K`` key length, ``H`` hidden size, ``P``
per-layer-input size (0 without per-layer embeddings), ``D`` head dim of the layer's type.

The layer's weights say which sub-blocks it has: attention, the dense MLP, a mixture-of-experts
block beside it (:mod:`.experts`) or not, a per-layer-input block or not.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..spec import DecoderWeights
from .experts import MixtureOfExperts
from .ops import apply_rope, gelu_tanh, rms_norm

MODES = ("prefill", "chunk", "decode")


class DecoderLayer(nn.Module):
    """``forward(hidden (B, S, H), per_layer_input (B, S, P), cos, sin (B, S, D), mask (B, 1, S, K)
    additive, kv, slots)`` returns ``(hidden (B, S, H), key, value)``:

    - a producing layer computes this step's K/V ``(B, kv_heads, S, D)`` and returns them. With
      ``kv = None`` (single-shot prefill) it attends over them alone (``K = S``); with ``kv`` the
      static cache ``(B, kv_heads, max_seq, D)`` it attends over the cache with this step's K/V
      placed at ``slots (B, S)`` (``K = max_seq``). The cache itself is written by the runtime.
    - a layer that reuses K/V attends over ``kv`` (the producer's K/V) and returns them unchanged.

    Attention uses ``scaling = 1.0`` (q and k are RMS-normed) through torch's fused SDPA kernel; with
    one query a row (decode) the query heads that share a K/V head are the rows of one attention over
    it (torch's GQA path repeats K/V per query head instead: about 6x slower for a full-attention
    layer of E2B's widths over 1,025 slots).
    """

    def __init__(self, weights: DecoderWeights, *, eps: float, num_kv_heads: int) -> None:
        super().__init__()
        self.reuses_kv = weights.k_proj is None
        self.eps = eps
        self.head_dim = weights.head_dim
        self.num_kv_heads = num_kv_heads
        self.q_proj, self.o_proj, self.q_norm = weights.q_proj, weights.o_proj, weights.q_norm
        self.k_proj, self.v_proj, self.k_norm = weights.k_proj, weights.v_proj, weights.k_norm  # v_proj None: K = V
        self.gate_proj, self.up_proj, self.down_proj = weights.gate_proj, weights.up_proj, weights.down_proj
        self.input_norm = weights.input_norm
        self.post_attention_norm = weights.post_attention_norm
        self.pre_feedforward_norm = weights.pre_feedforward_norm
        self.post_feedforward_norm = weights.post_feedforward_norm
        self.experts = None if weights.experts is None else MixtureOfExperts(weights.experts, eps)
        per_layer = weights.per_layer
        self.ple_gate = None if per_layer is None else per_layer.gate
        self.ple_projection = None if per_layer is None else per_layer.projection
        self.post_ple_norm = None if per_layer is None else per_layer.post_norm
        self.register_buffer("layer_scalar", weights.layer_scalar, persistent=False)

    @property
    def per_layer_input_size(self) -> int:
        """``P``: the width of this layer's per-layer input (0 without per-layer embeddings)."""
        return 0 if self.ple_gate is None else self.ple_gate.out_features

    def project_kv(
        self, normed: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """This layer's K and V ``(B, kv_heads, S, D)`` for normed hidden states ``(B, S, H)``."""
        shape = (*normed.shape[:2], -1, self.head_dim)
        key = self.k_proj(normed).view(shape)
        value = self.v_proj(normed).view(shape) if self.v_proj is not None else key
        key = apply_rope(rms_norm(key, self.k_norm, self.eps), cos, sin)
        value = rms_norm(value, None, self.eps)
        return key.transpose(1, 2), value.transpose(1, 2)

    def forward(
        self,
        hidden: torch.Tensor,
        per_layer_input: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        mask: torch.Tensor,
        kv: tuple[torch.Tensor, torch.Tensor] | None = None,
        slots: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        query, key, value = self.attention_inputs(hidden, cos, sin)
        if self.reuses_kv:
            if kv is None:
                raise ValueError("kv must be given to a layer that reuses K/V")
            key, value = attended = kv
        else:
            attended = (key, value) if kv is None else place_in_cache(kv, key, value, slots)
        return self.attend_and_feed_forward(hidden, per_layer_input, query, *attended, mask), key, value

    def attention_inputs(
        self, hidden: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """The query ``(B, heads, S, D)`` and, for a producing layer, this step's K/V ``(B, kv_heads,
        S, D)`` (``None`` for a layer that reuses K/V)."""
        batch, length = hidden.shape[:2]
        normed = rms_norm(hidden, self.input_norm, self.eps)
        query = self.q_proj(normed).view(batch, length, -1, self.head_dim)
        query = apply_rope(rms_norm(query, self.q_norm, self.eps), cos, sin).transpose(1, 2)
        if self.reuses_kv:
            return query, None, None
        return query, *self.project_kv(normed, cos, sin)

    def attend_and_feed_forward(
        self,
        hidden: torch.Tensor,
        per_layer_input: torch.Tensor,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor,
    ) -> torch.Tensor:
        """The layer's output ``(B, S, H)``: ``query`` attending over ``key``/``value`` ``(B, kv_heads, K,
        D)`` under the additive ``mask (B, 1, S, K)``, then the feed-forward and per-layer-input blocks."""
        batch, length = hidden.shape[:2]
        if length == 1:  # decode: each K/V head's query heads are the rows of one product over its keys
            grouped = query.reshape(batch, self.num_kv_heads, -1, self.head_dim)  # (B, kv_heads, heads / kv_heads, D)
            attended = F.scaled_dot_product_attention(grouped, key, value, attn_mask=mask, scale=1.0)
            attended = attended.reshape(batch, 1, -1)
        else:
            attended = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=1.0, enable_gqa=True)
            attended = attended.transpose(1, 2).reshape(batch, length, -1)
        hidden = hidden + rms_norm(self.o_proj(attended), self.post_attention_norm, self.eps)

        normed = rms_norm(hidden, self.pre_feedforward_norm, self.eps)
        feedforward = self.down_proj(gelu_tanh(self.gate_proj(normed)) * self.up_proj(normed))
        if self.experts is not None:
            feedforward = self.experts(feedforward, hidden)
        hidden = hidden + rms_norm(feedforward, self.post_feedforward_norm, self.eps)

        if self.ple_gate is not None:  # per_layer_input is (B, S, 0) without per-layer embeddings
            gated = gelu_tanh(self.ple_gate(hidden)) * per_layer_input
            hidden = hidden + rms_norm(self.ple_projection(gated), self.post_ple_norm, self.eps)
        return hidden * self.layer_scalar

    def example_inputs(
        self, batch: int, length: int, generator: torch.Generator, *, cache_slots: int, mode: str
    ) -> tuple[torch.Tensor | tuple[torch.Tensor, torch.Tensor] | None, ...]:
        """Random inputs of one static mode: ``prefill`` (``length`` queries over this step's K/V, or
        the producer's ``cache_slots`` K/V for a reusing layer), ``chunk`` (``length`` queries over
        ``cache_slots`` K/V: the cache, or a ring with room for the chunk) or ``decode`` (one query)."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        length = 1 if mode == "decode" else length
        from_cache = mode != "prefill" or self.reuses_kv
        dtype = self.q_proj.weight.dtype
        cache_shape = (batch, self.num_kv_heads, cache_slots, self.head_dim)
        cache = (torch.randn(cache_shape, generator=generator, dtype=dtype),) * 2
        return (
            torch.randn(batch, length, self.q_proj.in_features, generator=generator, dtype=dtype),
            torch.randn(batch, length, self.per_layer_input_size, generator=generator, dtype=dtype),
            torch.randn(batch, length, self.head_dim, generator=generator, dtype=dtype),
            torch.randn(batch, length, self.head_dim, generator=generator, dtype=dtype),
            torch.zeros(batch, 1, length, cache_slots if from_cache else length, dtype=dtype),
            cache if from_cache else None,
            torch.arange(length).expand(batch, -1).contiguous(),
        )


def place_in_cache(
    cache: tuple[torch.Tensor, torch.Tensor], key: torch.Tensor, value: torch.Tensor, slots: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The cache ``(B, kv_heads, max_seq, D)`` with ``key``/``value`` ``(B, kv_heads, S, D)`` at ``slots (B, S)``
    (out of place: a scatter with static shapes). A Circle export replaces it with the same placement
    as a one-hot product (:mod:`gemma4_static.circle.decompositions`: TICO converts no scatter)."""
    index = slots[:, None, :, None].expand_as(key)
    return cache[0].scatter(2, index, key), cache[1].scatter(2, index, value)
