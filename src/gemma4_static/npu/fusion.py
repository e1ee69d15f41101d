"""Fixed-slot fusion: soft tokens written into the embeddings by slicing (no ``masked_scatter``)."""

from __future__ import annotations

import torch
from torch import nn


class FixedSlotFusion(nn.Module):
    """Writes soft tokens ``(B, T, H)`` into embeddings ``(B, S, H)`` at ``[start, start + T)`` by slicing."""

    def __init__(self, start: int, count: int, hidden_size: int, dtype: torch.dtype) -> None:
        super().__init__()
        self.start, self.count, self.hidden_size, self.dtype = start, count, hidden_size, dtype

    def forward(self, embeds: torch.Tensor, soft_tokens: torch.Tensor) -> torch.Tensor:
        end = self.start + soft_tokens.shape[1]
        return torch.cat((embeds[:, : self.start], soft_tokens.to(embeds.dtype), embeds[:, end:]), dim=1)

    def example_inputs(self, batch: int, length: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """Random embeddings ``(batch, length, H)`` and soft tokens ``(batch, count, H)``."""
        embeds = torch.randn(batch, length, self.hidden_size, generator=generator, dtype=self.dtype)
        soft = torch.randn(batch, self.count, self.hidden_size, generator=generator, dtype=self.dtype)
        return embeds, soft
