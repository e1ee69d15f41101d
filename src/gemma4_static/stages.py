"""The NPU-side stages: ``nn.Module``s of fixed-shape tensors that hold only weights.

Each stage takes its weights from an HF Gemma 4 model (sharing the parameter tensors, never
copying them by hand) and computes with plain torch ops; nothing here calls HF's attention,
decoder-layer or model ``forward``. Shapes: ``B`` batch, ``S`` query length, ``K`` key length,
``H`` hidden size, ``L`` layers, ``P`` per-layer-input size, ``D`` head dim of the layer's type.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None, eps: float) -> torch.Tensor:
    """Gemma 4 RMSNorm: in fp32, ``x * (mean(x**2) + eps) ** -0.5 * weight``, cast back to ``x``'s dtype."""
    x32 = x.float()
    normed = x32 * torch.pow(x32.pow(2).mean(-1, keepdim=True) + eps, -0.5)
    if weight is not None:
        normed = normed * weight.float()
    return normed.type_as(x)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x`` ``(B, S, heads, D)`` by ``cos``/``sin`` ``(B, S, D)`` (halves concatenated)."""
    cos, sin = cos[:, :, None, :], sin[:, :, None, :]
    return x * cos + rotate_half(x) * sin


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")


class TokenEmbedding(nn.Module):
    """``ids (B, S)`` -> ``(B, S, H)``: the table row times ``sqrt(H)`` cast to the weight dtype (as HF)."""

    def __init__(self, weight: torch.Tensor, scale: float) -> None:
        super().__init__()
        self.weight = weight
        self.register_buffer("scale", torch.tensor(scale), persistent=False)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return F.embedding(input_ids, self.weight) * self.scale.to(self.weight.dtype)


class PerLayerInputs(nn.Module):
    """Per-layer embeddings (PLE): ``(ids (B, S), embeds (B, S, H))`` -> ``(B, S, L, P)``.

    ``ids`` are the LLM-side ids (image positions already replaced by the pad id); ``embeds`` are
    the fused embeddings. Result: ``(norm(proj(embeds) / sqrt(H)) + table[ids] * sqrt(P)) / sqrt(2)``.
    """

    def __init__(self, text_model: nn.Module) -> None:
        super().__init__()
        config = text_model.config
        self.num_layers = config.num_hidden_layers
        self.size = config.hidden_size_per_layer_input
        self.eps = config.rms_norm_eps
        self.table = TokenEmbedding(text_model.embed_tokens_per_layer.weight, self.size**0.5)
        self.projection = text_model.per_layer_model_projection.weight
        self.projection_scale = config.hidden_size**-0.5
        self.norm_weight = text_model.per_layer_projection_norm.weight

    def forward(self, input_ids: torch.Tensor, embeds: torch.Tensor) -> torch.Tensor:
        shape = (*input_ids.shape, self.num_layers, self.size)
        identity = self.table(input_ids).reshape(shape)
        context = (F.linear(embeds, self.projection) * self.projection_scale).reshape(shape)
        context = rms_norm(context, self.norm_weight, self.eps)
        return (context + identity) * 2.0**-0.5


class VisionPrefill(nn.Module):
    """``(pixel_values (N, patches, 3 p^2), image_position_ids (N, patches, 2))`` -> ``(N, T, H)``.

    Runs the vision tower's patch embedder, encoder and pooler and ``embed_vision`` for a fixed
    patch budget; ``T = patches // pooling_kernel_size**2`` pooled soft tokens per image, padded
    ones last (the runtime keeps the first ``num_visual_tokens``).
    """

    def __init__(self, vision_tower: nn.Module, embed_vision: nn.Module) -> None:
        super().__init__()
        self.vision_tower = vision_tower
        self.embed_vision = embed_vision
        self.kernel = vision_tower.config.pooling_kernel_size

    def forward(self, pixel_values: torch.Tensor, image_position_ids: torch.Tensor) -> torch.Tensor:
        tower = self.vision_tower
        padding = (image_position_ids == -1).all(dim=-1)
        embeds = tower.patch_embedder(pixel_values, image_position_ids, padding)
        encoded = tower.encoder(
            inputs_embeds=embeds, attention_mask=~padding, pixel_position_ids=image_position_ids
        ).last_hidden_state
        pooled, _ = tower.pooler(
            hidden_states=encoded,
            pixel_position_ids=image_position_ids,
            padding_positions=padding,
            output_length=pixel_values.shape[1] // self.kernel**2,
        )
        if tower.config.standardize:
            pooled = (pooled - tower.std_bias.float()) * tower.std_scale.float()
        return self.embed_vision(pooled.to(embeds.dtype))


class FixedSlotFusion(nn.Module):
    """Writes soft tokens ``(B, T, H)`` into embeddings ``(B, S, H)`` at ``[start, start + T)`` by slicing."""

    def __init__(self, start: int) -> None:
        super().__init__()
        self.start = start

    def forward(self, embeds: torch.Tensor, soft_tokens: torch.Tensor) -> torch.Tensor:
        end = self.start + soft_tokens.shape[1]
        return torch.cat((embeds[:, : self.start], soft_tokens.to(embeds.dtype), embeds[:, end:]), dim=1)


class DecoderLayer(nn.Module):
    """One Gemma 4 decoder layer with explicit K/V in and out, for prefill, chunks and decode.

    ``forward(hidden (B, S, H), per_layer_input (B, S, P), cos, sin (B, S, D), mask (B, 1, S, K)
    additive, kv, slots)`` returns ``(hidden (B, S, H), key, value)``:

    - a producing layer computes this step's K/V ``(B, kv_heads, S, D)`` and returns them. With
      ``kv = None`` (single-shot prefill) it attends over them alone (``K = S``); with ``kv`` the
      static cache ``(B, kv_heads, max_seq, D)`` it attends over the cache with this step's K/V
      placed at ``slots (B, S)`` (``K = max_seq``). The cache itself is written by the runtime.
    - a layer that reuses K/V attends over ``kv`` (the producer's K/V) and returns them unchanged.

    Attention uses ``scaling = 1.0`` (q and k are RMS-normed).
    """

    def __init__(self, layer: nn.Module, *, reuses_kv: bool, eps: float) -> None:
        super().__init__()
        attention = layer.self_attn
        self.reuses_kv = reuses_kv
        self.eps = eps
        self.head_dim = attention.head_dim
        self.q_proj, self.o_proj = attention.q_proj, attention.o_proj
        self.q_norm = attention.q_norm.weight
        if not reuses_kv:
            self.k_proj, self.v_proj = attention.k_proj, attention.v_proj  # v_proj is None when k == v
            self.k_norm = attention.k_norm.weight
        self.gate_proj, self.up_proj, self.down_proj = layer.mlp.gate_proj, layer.mlp.up_proj, layer.mlp.down_proj
        self.input_norm = layer.input_layernorm.weight
        self.post_attention_norm = layer.post_attention_layernorm.weight
        self.pre_feedforward_norm = layer.pre_feedforward_layernorm.weight
        self.post_feedforward_norm = layer.post_feedforward_layernorm.weight
        self.ple_gate, self.ple_projection = layer.per_layer_input_gate, layer.per_layer_projection
        self.post_ple_norm = layer.post_per_layer_input_norm.weight
        self.register_buffer("layer_scalar", layer.layer_scalar, persistent=False)

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

    def attend(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Grouped-query attention of ``query (B, heads, S, D)`` over ``key``/``value`` ``(B, kv_heads, K, D)``
        with the additive ``mask (B, 1, S, K)`` and ``scaling = 1.0``, through torch's fused SDPA kernel."""
        return F.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=1.0, enable_gqa=True)

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
        batch, length = hidden.shape[:2]
        normed = rms_norm(hidden, self.input_norm, self.eps)
        query = self.q_proj(normed).view(batch, length, -1, self.head_dim)
        query = apply_rope(rms_norm(query, self.q_norm, self.eps), cos, sin).transpose(1, 2)
        if self.reuses_kv:
            if kv is None:
                raise ValueError("kv must be given to a layer that reuses K/V")
            key, value = attend_key, attend_value = kv
        else:
            key, value = self.project_kv(normed, cos, sin)
            attend_key, attend_value = (key, value) if kv is None else _place(kv, key, value, slots)
        attended = self.attend(query, attend_key, attend_value, mask).transpose(1, 2).reshape(batch, length, -1)
        hidden = hidden + rms_norm(self.o_proj(attended), self.post_attention_norm, self.eps)

        normed = rms_norm(hidden, self.pre_feedforward_norm, self.eps)
        mlp = self.down_proj(gelu_tanh(self.gate_proj(normed)) * self.up_proj(normed))
        hidden = hidden + rms_norm(mlp, self.post_feedforward_norm, self.eps)

        gated = gelu_tanh(self.ple_gate(hidden)) * per_layer_input
        hidden = hidden + rms_norm(self.ple_projection(gated), self.post_ple_norm, self.eps)
        return hidden * self.layer_scalar, key, value


def _place(
    cache: tuple[torch.Tensor, torch.Tensor], key: torch.Tensor, value: torch.Tensor, slots: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The cache ``(B, kv_heads, max_seq, D)`` with ``key``/``value`` ``(B, kv_heads, S, D)`` at ``slots (B, S)``
    (out of place: a scatter with static shapes)."""
    index = slots[:, None, :, None].expand_as(key)
    return cache[0].scatter(2, index, key), cache[1].scatter(2, index, value)


class LMHead(nn.Module):
    """Final norm, LM head and logit softcapping ``tanh(x / c) * c``: ``(B, S, H)`` -> ``(B, S, vocab)``."""

    def __init__(self, norm_weight: torch.Tensor, weight: torch.Tensor, eps: float, softcap: float | None) -> None:
        super().__init__()
        self.norm_weight = norm_weight
        self.weight = weight
        self.eps = eps
        self.softcap = softcap

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        logits = F.linear(rms_norm(hidden, self.norm_weight, self.eps), self.weight)
        if self.softcap is None:
            return logits
        return torch.tanh(logits / self.softcap) * self.softcap
