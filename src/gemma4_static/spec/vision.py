"""HF Gemma 4 vision tower -> :class:`VisionSpec` and :class:`VisionWeights` (sizes, RoPE theta, clip
bounds and the weights of every encoder layer by role). Nothing here imports ``transformers``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

SUPPORTED_ACTIVATION = "gelu_pytorch_tanh"


@dataclass(frozen=True)
class VisionSpec:
    """The vision tower's geometry: ``patch_size`` pixels per patch side, ``pooling_kernel_size``
    (``k``) patches per soft-token side, 2-D RoPE over ``head_dim`` (``head_dim // 4`` frequencies
    per axis), positions below ``position_embedding_size``."""

    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    patch_size: int
    pooling_kernel_size: int
    position_embedding_size: int
    rope_theta: float
    rms_norm_eps: float
    embed_eps: float
    standardize: bool


@dataclass(frozen=True)
class ClippedLinear:
    """A linear layer whose input and output are clamped to learned bounds when ``bounds`` is set:
    ``(input_min, input_max, output_min, output_max)`` scalars."""

    linear: nn.Linear
    bounds: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor] | None


@dataclass(frozen=True)
class VisionLayerWeights:
    """One encoder layer's weights by role."""

    q_proj: ClippedLinear
    k_proj: ClippedLinear
    v_proj: ClippedLinear
    o_proj: ClippedLinear
    q_norm: torch.Tensor
    k_norm: torch.Tensor
    gate_proj: ClippedLinear
    up_proj: ClippedLinear
    down_proj: ClippedLinear
    input_norm: torch.Tensor
    post_attention_norm: torch.Tensor
    pre_feedforward_norm: torch.Tensor
    post_feedforward_norm: torch.Tensor


@dataclass(frozen=True)
class VisionWeights:
    """Patch input projection ``(D, 3 p^2)``, position table ``(2, positions, D)``, encoder layers,
    standardization (``None`` unless enabled) and the projection into the text width ``(H, D)``."""

    input_proj: torch.Tensor
    position_table: torch.Tensor
    layers: tuple[VisionLayerWeights, ...]
    std_bias: torch.Tensor | None
    std_scale: torch.Tensor | None
    embed_projection: torch.Tensor


def read_vision(model: Any) -> tuple[VisionSpec, VisionWeights] | None:
    """The vision spec and weights of an HF ``Gemma4ForConditionalGeneration`` (``None`` without a tower)."""
    tower = model.model.vision_tower
    if tower is None:
        return None
    config = tower.config
    if config.hidden_activation != SUPPORTED_ACTIVATION:
        raise ValueError(
            f"vision_config.hidden_activation={config.hidden_activation!r} is not supported; "
            f"expected {SUPPORTED_ACTIVATION!r}"
        )
    rope = config.rope_parameters or {}
    if rope.get("rope_type") != "axial":
        raise ValueError(f"vision_config.rope_parameters['rope_type']={rope.get('rope_type')!r}; expected 'axial'")
    embedder = model.model.embed_vision
    spec = VisionSpec(
        hidden_size=int(config.hidden_size),
        num_layers=int(config.num_hidden_layers),
        num_heads=int(config.num_attention_heads),
        num_kv_heads=int(config.num_key_value_heads),
        head_dim=int(config.head_dim),
        patch_size=int(config.patch_size),
        pooling_kernel_size=int(config.pooling_kernel_size),
        position_embedding_size=int(config.position_embedding_size),
        rope_theta=float(rope["rope_theta"]),
        rms_norm_eps=float(config.rms_norm_eps),
        embed_eps=float(embedder.eps),
        standardize=bool(config.standardize),
    )
    weights = VisionWeights(
        input_proj=tower.patch_embedder.input_proj.weight,
        position_table=tower.patch_embedder.position_embedding_table,
        layers=tuple(_layer_weights(layer) for layer in tower.encoder.layers[: spec.num_layers]),
        std_bias=tower.std_bias if spec.standardize else None,
        std_scale=tower.std_scale if spec.standardize else None,
        embed_projection=embedder.embedding_projection.weight,
    )
    return spec, weights


def _clipped(module: nn.Module) -> ClippedLinear:
    bounds = None
    if module.use_clipped_linears:
        bounds = (module.input_min, module.input_max, module.output_min, module.output_max)
    return ClippedLinear(module.linear, bounds)


def _layer_weights(layer: nn.Module) -> VisionLayerWeights:
    attention, mlp = layer.self_attn, layer.mlp
    return VisionLayerWeights(
        q_proj=_clipped(attention.q_proj),
        k_proj=_clipped(attention.k_proj),
        v_proj=_clipped(attention.v_proj),
        o_proj=_clipped(attention.o_proj),
        q_norm=attention.q_norm.weight,
        k_norm=attention.k_norm.weight,
        gate_proj=_clipped(mlp.gate_proj),
        up_proj=_clipped(mlp.up_proj),
        down_proj=_clipped(mlp.down_proj),
        input_norm=layer.input_layernorm.weight,
        post_attention_norm=layer.post_attention_layernorm.weight,
        pre_feedforward_norm=layer.pre_feedforward_layernorm.weight,
        post_feedforward_norm=layer.post_feedforward_layernorm.weight,
    )
