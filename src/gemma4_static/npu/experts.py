"""Gemma 4's mixture-of-experts block at static shapes: the router and every expert on every token.

The static form: each token's routing weights become a dense ``(T, E)`` matrix (zeros outside its
top k), every expert runs on every token as two batched matmuls over the packed weights, and the
outputs are summed weighted by that matrix. No gather, scatter or loop depends on the routing, so
the stage has one shape for any prompt. Cost: ``E / k`` times the expert FLOPs of a dispatch that
runs each token through its k experts only (26B-A4B: 128 / 8 = 16x); the router and the dense MLP
beside it are unchanged.

The routing decision is HF's exactly: the same op sequence (scale-free RMS norm, ``* scale *
H ** -0.5``, the projection, softmax in fp32, ``torch.topk``), so ties are broken as
``torch.topk`` breaks them on the CPU. That order is its partial sort's, not a documented rule
(not simply the lower index first: with experts 0 and 1 tied for the 8th place it keeps 1); the
runtime inherits it by calling the same op on the same values (tested on exact ties).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..spec import ExpertWeights
from .ops import gelu_tanh, rms_norm


class Router(nn.Module):
    """``hidden (..., H)`` -> ``(weights (..., k) fp32, index (..., k))``: each token's experts and
    their renormalised, per-expert-scaled weights."""

    def __init__(self, weights: ExpertWeights, eps: float) -> None:
        super().__init__()
        self.scale, self.proj, self.per_expert_scale = (
            weights.router_scale,
            weights.router_proj,
            weights.per_expert_scale,
        )
        self.top_k, self.eps = weights.top_k, eps
        self.root_size = self.proj.shape[1] ** -0.5

    def forward(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        normed = rms_norm(hidden, None, self.eps) * self.scale * self.root_size
        probabilities = F.softmax(F.linear(normed, self.proj), dim=-1, dtype=torch.float32)
        top_weights, top_index = torch.topk(probabilities, k=self.top_k, dim=-1)
        top_weights = top_weights / top_weights.sum(dim=-1, keepdim=True)
        return top_weights * self.per_expert_scale[top_index], top_index


class MixtureOfExperts(nn.Module):
    """``(dense (B, S, H), residual (B, S, H))`` -> ``(B, S, H)``: the dense MLP's output (before the
    layer's post-feedforward norm) combined with the experts' as HF's decoder layer does:
    ``norm_1(dense) + norm_2(experts(norm(residual)))``, routed on ``residual``."""

    def __init__(self, weights: ExpertWeights, eps: float) -> None:
        super().__init__()
        self.router = Router(weights, eps)
        self.gate_up_proj, self.down_proj = weights.gate_up_proj, weights.down_proj
        self.pre_norm, self.post_norm, self.post_dense_norm = (
            weights.pre_norm,
            weights.post_norm,
            weights.post_dense_norm,
        )
        self.num_experts, self.eps = weights.num_experts, eps

    def routing(self, residual: torch.Tensor) -> torch.Tensor:
        """The dense routing matrix ``(B, S, E)`` fp32: each token's expert weights, zero elsewhere."""
        top_weights, top_index = self.router(residual)
        dense = top_weights.new_zeros((*residual.shape[:-1], self.num_experts))
        return dense.scatter(-1, top_index, top_weights)

    def experts(self, hidden: torch.Tensor, routing: torch.Tensor) -> torch.Tensor:
        """Every expert on every token of ``hidden (B, S, H)``, summed with ``routing (B, S, E)``."""
        gate, up = torch.einsum("bsh,eoh->bseo", hidden, self.gate_up_proj).chunk(2, dim=-1)
        outputs = torch.einsum("bsei,ehi->bseh", gelu_tanh(gate) * up, self.down_proj)
        return (outputs * routing[..., None]).sum(dim=2).to(hidden.dtype)

    def forward(self, dense: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        experts = self.experts(rms_norm(residual, self.pre_norm, self.eps), self.routing(residual))
        return rms_norm(dense, self.post_dense_norm, self.eps) + rms_norm(experts, self.post_norm, self.eps)
