"""The vision stage: images to soft tokens at a fixed patch budget, from the weights alone.

``forward(pixel_values (N, P, 3 p^2), positions (N, P, 2), padding (N, P), mask (N, 1, 1, P), cos,
sin (N, P, head_dim), pooling (N, T, P))`` -> soft tokens ``(N, T, H)``; every input but the pixels
comes from :mod:`gemma4_static.cpu.vision`. ``D`` is the vision width, ``H`` the text width.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..spec import ClippedLinear, VisionLayerWeights, VisionSpec, VisionWeights
from .ops import gelu_tanh, rms_norm, rotate_half


class ClippedProjection(nn.Module):
    """A linear layer with its input and output clamped to learned scalar bounds (when it has them)."""

    def __init__(self, weights: ClippedLinear) -> None:
        super().__init__()
        self.linear = weights.linear
        self.clipped = weights.bounds is not None
        if self.clipped:
            for name, bound in zip(("input_min", "input_max", "output_min", "output_max"), weights.bounds, strict=True):
                self.register_buffer(name, bound, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.clipped:
            return self.linear(x)
        x = torch.clamp(x, self.input_min, self.input_max)
        return torch.clamp(self.linear(x), self.output_min, self.output_max)


def apply_axial_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x`` ``(N, P, heads, D)``: the first half of each head by the x-angles, the second by the
    y-angles, each half with its own ``rotate_half``; ``cos``/``sin`` ``(N, P, D)`` are H-H-W-W."""
    cos, sin = cos[:, :, None, :], sin[:, :, None, :]
    half = x.shape[-1] // 2
    rotated = torch.cat((rotate_half(x[..., :half]), rotate_half(x[..., half:])), dim=-1)
    return x * cos + rotated * sin


class VisionEncoderLayer(nn.Module):
    """One bidirectional encoder layer: clipped projections, q/k/v RMS norms, axial RoPE, ``scaling = 1``."""

    def __init__(self, weights: VisionLayerWeights, spec: VisionSpec) -> None:
        super().__init__()
        self.eps, self.head_dim = spec.rms_norm_eps, spec.head_dim
        self.q_proj, self.k_proj = ClippedProjection(weights.q_proj), ClippedProjection(weights.k_proj)
        self.v_proj, self.o_proj = ClippedProjection(weights.v_proj), ClippedProjection(weights.o_proj)
        self.gate_proj, self.up_proj = ClippedProjection(weights.gate_proj), ClippedProjection(weights.up_proj)
        self.down_proj = ClippedProjection(weights.down_proj)
        self.q_norm, self.k_norm = weights.q_norm, weights.k_norm
        self.input_norm, self.post_attention_norm = weights.input_norm, weights.post_attention_norm
        self.pre_feedforward_norm, self.post_feedforward_norm = (
            weights.pre_feedforward_norm,
            weights.post_feedforward_norm,
        )

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        batch, patches = hidden.shape[:2]
        shape = (batch, patches, -1, self.head_dim)
        normed = rms_norm(hidden, self.input_norm, self.eps)
        query = apply_axial_rope(rms_norm(self.q_proj(normed).view(shape), self.q_norm, self.eps), cos, sin)
        key = apply_axial_rope(rms_norm(self.k_proj(normed).view(shape), self.k_norm, self.eps), cos, sin)
        value = rms_norm(self.v_proj(normed).view(shape), None, self.eps)
        attended = F.scaled_dot_product_attention(
            query.transpose(1, 2),
            key.transpose(1, 2),
            value.transpose(1, 2),
            attn_mask=mask,
            scale=1.0,
            enable_gqa=True,
        )
        attended = self.o_proj(attended.transpose(1, 2).reshape(batch, patches, -1))
        hidden = hidden + rms_norm(attended, self.post_attention_norm, self.eps)
        normed = rms_norm(hidden, self.pre_feedforward_norm, self.eps)
        mlp = self.down_proj(gelu_tanh(self.gate_proj(normed)) * self.up_proj(normed))
        return hidden + rms_norm(mlp, self.post_feedforward_norm, self.eps)


class VisionEncoder(nn.Module):
    """Patch embedding, encoder layers, pooling by a static matrix, standardization and ``embed_vision``."""

    def __init__(self, spec: VisionSpec, weights: VisionWeights) -> None:
        super().__init__()
        self.spec = spec
        self.input_proj = weights.input_proj
        self.position_table = weights.position_table
        self.layers = nn.ModuleList(VisionEncoderLayer(layer, spec) for layer in weights.layers)
        self.std_bias, self.std_scale = weights.std_bias, weights.std_scale
        self.embed_projection = weights.embed_projection

    def embed_patches(self, pixel_values: torch.Tensor, positions: torch.Tensor, padding: torch.Tensor) -> torch.Tensor:
        """``(N, P, D)``: ``input_proj(2 (pixels - 0.5))`` plus the x and y position embeddings (zero when padded)."""
        hidden = F.linear((2 * (pixel_values - 0.5)).to(self.input_proj.dtype), self.input_proj)
        table = self.position_table
        position = F.embedding(positions[..., 0], table[0]) + F.embedding(positions[..., 1], table[1])
        return hidden + torch.where(padding[..., None], torch.zeros((), dtype=position.dtype), position)

    def pool(self, hidden: torch.Tensor, pooling: torch.Tensor) -> torch.Tensor:
        """``(N, T, D)`` fp32: ``pooling @ hidden`` (in fp32, rounded to the hidden dtype) times ``sqrt(D)``."""
        pooled = torch.matmul(pooling, hidden.float()).to(hidden.dtype)
        return pooled.float() * self.spec.hidden_size**0.5

    def project(self, pooled: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """Soft tokens ``(N, T, H)``: standardize in fp32 (if enabled), cast, scale-free RMSNorm, projection."""
        if self.std_bias is not None:
            pooled = (pooled - self.std_bias.float()) * self.std_scale.float()
        return F.linear(rms_norm(pooled.to(dtype), None, self.spec.embed_eps), self.embed_projection)

    def forward(
        self,
        pixel_values: torch.Tensor,
        positions: torch.Tensor,
        padding: torch.Tensor,
        mask: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        pooling: torch.Tensor,
    ) -> torch.Tensor:
        hidden = self.embed_patches(pixel_values, positions, padding)
        for layer in self.layers:
            hidden = layer(hidden, mask, cos, sin)
        return self.project(self.pool(hidden, pooling), hidden.dtype)
