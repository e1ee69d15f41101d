"""The weights each stage holds, by role, read from an HF Gemma 4 model by :mod:`.model` (shared with
the HF model, never copied)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .vision import VisionWeights


@dataclass(frozen=True)
class PerLayerInputWeights:
    """A decoder layer's per-layer-input (PLE) block: gate ``H -> P``, projection ``P -> H``, norm."""

    gate: nn.Linear
    projection: nn.Linear
    post_norm: torch.Tensor


@dataclass(frozen=True)
class ExpertWeights:
    """A decoder layer's mixture-of-experts block (beside its dense MLP).

    Router: scale-free RMS norm, times ``scale (H,)`` and ``H ** -0.5``, ``proj (E, H)``, softmax in
    fp32, top ``top_k``, renormalised, times ``per_expert_scale (E,)``. Experts: ``gate_up_proj
    (E, 2I, H)`` (gate rows first), ``down_proj (E, H, I)``. Norms: ``pre_norm`` on the experts'
    input, ``post_norm`` on their sum, ``post_dense_norm`` on the dense MLP's output.
    """

    router_scale: torch.Tensor
    router_proj: torch.Tensor
    per_expert_scale: torch.Tensor
    top_k: int
    gate_up_proj: torch.Tensor
    down_proj: torch.Tensor
    pre_norm: torch.Tensor
    post_norm: torch.Tensor
    post_dense_norm: torch.Tensor

    @property
    def num_experts(self) -> int:
        return int(self.gate_up_proj.shape[0])


@dataclass(frozen=True)
class DecoderWeights:
    """One decoder layer's weights by role: projections as ``nn.Linear``, norm weights as tensors.

    ``k_proj``/``k_norm`` are ``None`` for a layer that reuses K/V, ``v_proj`` also when K = V;
    ``per_layer`` is ``None`` without per-layer embeddings, ``experts`` without a MoE block.
    """

    head_dim: int
    q_proj: nn.Linear
    k_proj: nn.Linear | None
    v_proj: nn.Linear | None
    o_proj: nn.Linear
    q_norm: torch.Tensor
    k_norm: torch.Tensor | None
    gate_proj: nn.Linear
    up_proj: nn.Linear
    down_proj: nn.Linear
    input_norm: torch.Tensor
    post_attention_norm: torch.Tensor
    pre_feedforward_norm: torch.Tensor
    post_feedforward_norm: torch.Tensor
    per_layer: PerLayerInputWeights | None
    experts: ExpertWeights | None
    layer_scalar: torch.Tensor


@dataclass(frozen=True)
class PerLayerEmbeddingWeights:
    """The per-layer-input stage's weights: the packed table ``(V_ple, L * P)``, the projection
    ``(L * P, H)`` of the embeddings and its norm ``(P,)``."""

    table: torch.Tensor
    projection: torch.Tensor
    projection_norm: torch.Tensor


@dataclass(frozen=True)
class ModelWeights:
    """The weights each stage holds (shared with the HF model, never copied); ``per_layer`` is
    ``None`` without per-layer embeddings, ``vision`` without a vision tower."""

    embed_tokens: torch.Tensor
    per_layer: PerLayerEmbeddingWeights | None
    layers: tuple[DecoderWeights, ...]
    final_norm: torch.Tensor
    lm_head: torch.Tensor
    vision: VisionWeights | None
