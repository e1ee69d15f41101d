"""The image side of a prefill: each image slot that some row fills gets its vision stage call at
the slot's profile and its fixed-slot fusion; rows whose slot holds text keep their embeddings."""

from __future__ import annotations

from typing import Any

import torch

from .cpu.images import check_image_inputs, slot_images
from .cpu.inputs import StaticInputs
from .cpu.layout import StaticLayout
from .spec import ModelSpec


def fuse_images(
    stages: Any,
    spec: ModelSpec,
    layout: StaticLayout,
    inputs: StaticInputs,
    embeddings: torch.Tensor,
    pixel_values: Any,
    image_position_ids: Any,
    mask_value: float,
) -> tuple[torch.Tensor, tuple[torch.Tensor, ...] | None]:
    """The embeddings ``(B, max_seq, H)`` with every image's soft tokens in its slot, and the soft
    tokens themselves, one ``(tokens, H)`` per image in the caller's order (``None`` without images).
    ``stages`` are the runtime's (PyTorch modules or their ExecuTorch programs)."""
    images = check_image_inputs(
        pixel_values, image_position_ids, layout, vision=spec.vision, image_count=inputs.image_count
    )
    if not images:
        return embeddings, None
    index = inputs.image_index()
    soft: list[torch.Tensor] = [embeddings.new_empty(0)] * inputs.image_count
    fused = embeddings
    calls = slot_images(pixel_values, image_position_ids, index, spec.vision, layout, spec.dtype, mask_value)
    for call in calls:
        tokens = stages.vision(call.pixel_values, *call.inputs.stage_args())[:, : layout.image_slots[call.slot][1]]
        fused = torch.where(call.filled[:, None, None], stages.fusions[call.slot](fused, tokens), fused)
        for row in call.filled.nonzero().flatten().tolist():
            soft[int(index[row, call.slot])] = tokens[row]
    return fused, tuple(soft)
