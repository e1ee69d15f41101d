"""The vision stage: images to soft tokens at a fixed patch budget.

This stage still runs Hugging Face's own vision modules (patch embedder, encoder, pooler and
``embed_vision`` forwards, handed over by :mod:`gemma4_static.spec`): its parity with HF is
HF against HF until an independent implementation replaces it.
"""

from __future__ import annotations

import torch
from torch import nn


class VisionPrefill(nn.Module):
    """``(pixel_values (N, patches, 3 p^2), image_position_ids (N, patches, 2))`` -> ``(N, T, H)``.

    ``T = patches // pooling_kernel_size**2`` pooled soft tokens per image, padded ones last (the
    runtime keeps the first ``num_visual_tokens``).
    """

    def __init__(self, vision_tower: nn.Module, embed_vision: nn.Module, kernel: int) -> None:
        super().__init__()
        self.vision_tower = vision_tower
        self.embed_vision = embed_vision
        self.kernel = kernel

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
