"""Final norm, LM head and logit softcapping."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .ops import rms_norm


class HeadMatmul(nn.Module):
    """``F.linear(normed, weight)``: the LM head's matmul as a module of its own, so an integer
    profile quantizes its input where an NPU's matmul reads it (after the final norm)."""

    def forward(self, normed: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return F.linear(normed, weight)


class LMHead(nn.Module):
    """Final norm, LM head and logit softcapping ``tanh(x / c) * c``: ``(B, S, H)`` -> ``(B, S, vocab)``."""

    def __init__(self, norm_weight: torch.Tensor, weight: torch.Tensor, eps: float, softcap: float | None) -> None:
        super().__init__()
        self.norm_weight = norm_weight
        self.weight = weight
        self.eps = eps
        self.softcap = softcap
        self.matmul = HeadMatmul()

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        logits = self.matmul(rms_norm(hidden, self.norm_weight, self.eps), self.weight)
        if self.softcap is None:
            return logits
        return torch.tanh(logits / self.softcap) * self.softcap

    def example_inputs(self, batch: int, length: int, generator: torch.Generator) -> tuple[torch.Tensor]:
        """Random hidden states ``(batch, length, H)``."""
        return (torch.randn(batch, length, self.weight.shape[1], generator=generator, dtype=self.weight.dtype),)
