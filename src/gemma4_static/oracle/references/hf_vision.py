"""Hugging Face's vision tower as the oracle: its sub-stage outputs, mask and 2-D RoPE for a batch of
processed images, recorded from one ``get_image_features`` call (hooks, no re-implementation)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from .hf import expand_hf_mask
from .recording import recorded


@dataclass(frozen=True)
class HFVisionOutputs:
    """``patch_embeddings`` ``(N, P, D)``, ``layers`` (each encoder layer's output), ``pooled``
    ``(N, T, D)`` fp32 (the pooler's output before standardization) and ``soft_tokens``, one
    ``(T_i, H)`` per image (``get_image_features``: each image's valid soft tokens)."""

    patch_embeddings: torch.Tensor
    layers: tuple[torch.Tensor, ...]
    pooled: torch.Tensor
    soft_tokens: tuple[torch.Tensor, ...]


@recorded
@torch.no_grad()
def hf_vision_outputs(model: Any, pixel_values: torch.Tensor, image_position_ids: torch.Tensor) -> HFVisionOutputs:
    """Run HF's ``get_image_features`` once and record every sub-stage on the way."""
    tower = model.model.vision_tower
    recorded: dict[str, Any] = {"layers": []}
    hooks = [
        tower.patch_embedder.register_forward_hook(lambda m, a, out: recorded.__setitem__("embed", out)),
        tower.pooler.register_forward_hook(lambda m, a, out: recorded.__setitem__("pooled", out[0])),
        *(
            layer.register_forward_hook(lambda m, a, out: recorded["layers"].append(out))
            for layer in tower.encoder.layers
        ),
    ]
    try:
        soft = model.model.get_image_features(pixel_values, image_position_ids).pooler_output
    finally:
        for hook in hooks:
            hook.remove()
    return HFVisionOutputs(recorded["embed"], tuple(recorded["layers"]), recorded["pooled"], tuple(soft))


@recorded
def hf_vision_mask(model: Any, image_position_ids: torch.Tensor) -> torch.Tensor:
    """HF's encoder mask as a boolean ``(N, 1, P, P)`` pattern (``None`` = every key), ``True`` = allowed."""
    from transformers.masking_utils import create_bidirectional_mask

    tower = model.model.vision_tower
    padding = (image_position_ids == -1).all(dim=-1)
    batch, patches = padding.shape
    embeds = torch.zeros(batch, patches, 1)
    mask = create_bidirectional_mask(config=tower.config, inputs_embeds=embeds, attention_mask=~padding)
    return expand_hf_mask(mask, batch, patches, patches, causal=False)


@recorded
@torch.no_grad()
def hf_vision_rope(
    model: Any, image_position_ids: torch.Tensor, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """HF's ``Gemma4VisionRotaryEmbedding`` cos/sin ``(N, P, head_dim)`` in ``dtype``."""
    rotary = model.model.vision_tower.encoder.rotary_emb
    return rotary(torch.zeros((), dtype=dtype), image_position_ids)


@recorded
@torch.no_grad()
def hf_image_features(
    model: Any, pixel_values: torch.Tensor, image_position_ids: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    """HF's ``get_image_features``: each image's valid soft tokens, ``(T_i, H)`` per image."""
    return tuple(model.model.get_image_features(pixel_values, image_position_ids).pooler_output)
