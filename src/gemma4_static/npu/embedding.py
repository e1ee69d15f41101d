"""Token embedding and per-layer embeddings (PLE): ``ids`` -> ``(B, S, H)`` and ``(B, S, L, P)``
(``P = 0`` for a model without per-layer embeddings: an empty tensor, no NPU stage)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..spec import ModelSpec, PerLayerEmbeddingWeights
from .ops import rms_norm


class TokenEmbedding(nn.Module):
    """``ids (B, S)`` -> ``(B, S, H)`` in ``dtype``: the table row, cast to ``dtype`` where the table is
    kept in another (a checkpoint's bfloat16 table in the float32 profile: exact), times ``sqrt(H)``
    cast to ``dtype`` (as HF over a table in ``dtype``)."""

    def __init__(self, weight: torch.Tensor, scale: float, dtype: torch.dtype) -> None:
        super().__init__()
        self.weight = weight
        self.dtype = dtype
        self.register_buffer("scale", torch.tensor(scale), persistent=False)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return F.embedding(input_ids, self.weight).to(self.dtype) * self.scale.to(self.dtype)

    def example_inputs(self, batch: int, length: int, generator: torch.Generator) -> tuple[torch.Tensor]:
        """Random in-vocabulary ids ``(batch, length)``."""
        return (torch.randint(0, self.weight.shape[0], (batch, length), generator=generator),)


class PerLayerInputs(nn.Module):
    """Per-layer embeddings (PLE): ``(ids (B, S), embeds (B, S, H))`` -> ``(B, S, L, P)``.

    ``ids`` are the LLM-side ids (image positions already replaced by the pad id); ``embeds`` are
    the fused embeddings. Result: ``(norm(proj(embeds) / sqrt(H)) + table[ids] * sqrt(P)) / sqrt(2)``.
    """

    def __init__(self, spec: ModelSpec, weights: PerLayerEmbeddingWeights) -> None:
        super().__init__()
        self.num_layers = spec.num_layers
        self.size = spec.per_layer_input_size
        self.eps = spec.rms_norm_eps
        self.table = TokenEmbedding(weights.table, self.size**0.5, spec.dtype)
        self.projection = weights.projection
        self.projection_scale = spec.hidden_size**-0.5
        self.norm_weight = weights.projection_norm

    def forward(self, input_ids: torch.Tensor, embeds: torch.Tensor) -> torch.Tensor:
        shape = (*input_ids.shape, self.num_layers, self.size)
        identity = self.table(input_ids).reshape(shape)
        context = (F.linear(embeds, self.projection) * self.projection_scale).reshape(shape)
        context = rms_norm(context, self.norm_weight, self.eps)
        return (context + identity) * 2.0**-0.5

    def example_inputs(self, batch: int, length: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """Random ids ``(batch, length)`` and embeddings ``(batch, length, H)``."""
        (ids,) = self.table.example_inputs(batch, length, generator)
        embeds = torch.randn(batch, length, self.projection.shape[1], generator=generator, dtype=self.projection.dtype)
        return ids, embeds


class NoPerLayerInputs(nn.Module):
    """A model without per-layer embeddings: ``(ids (B, S), embeds (B, S, H))`` -> the empty
    ``(B, S, L, 0)``, so every decoder layer takes the same arguments. Computed on the CPU side
    (``runs_on_npu`` is false): there is nothing to deploy."""

    runs_on_npu = False

    def __init__(self, num_layers: int) -> None:
        super().__init__()
        self.num_layers = num_layers

    def forward(self, input_ids: torch.Tensor, embeds: torch.Tensor) -> torch.Tensor:
        return embeds.new_zeros((*input_ids.shape, self.num_layers, 0))
