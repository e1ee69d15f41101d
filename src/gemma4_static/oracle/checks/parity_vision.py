"""The vision stage's parity checks against HF, sub-stage by sub-stage, written once.

Each sub-stage of ours runs on our own previous output (errors accumulate as in deployment), so the
first failing row is where the divergence starts: encoder mask and 2-D RoPE (the CPU side), patch
embeddings, every encoder layer (valid patches), pooled output, soft tokens.
"""

from __future__ import annotations

from typing import Any

import torch

from ...cpu.vision import build_vision_inputs
from ...npu.vision import VisionEncoder
from ...spec import read_model
from ..references.hf_vision import hf_vision_mask, hf_vision_outputs, hf_vision_rope
from ..results import tolerances
from ..results.report import Row
from .parity import compare, stage_row


def vision_encoder(model: Any) -> VisionEncoder:
    """Our vision stage for ``model`` (an HF ``Gemma4ForConditionalGeneration`` with a vision tower)."""
    spec, weights = read_model(model)
    return VisionEncoder(spec.vision, weights.vision)


def vision_input_rows(model: Any, image_position_ids: torch.Tensor, *, profile: int, dtype: torch.dtype) -> list[Row]:
    """The CPU side: the encoder's key-padding mask vs ``create_bidirectional_mask`` (exact) and the
    2-D RoPE vs ``Gemma4VisionRotaryEmbedding`` on the valid patches (``tolerances.ROPE``)."""
    spec = read_model(model)[0].vision
    inputs = build_vision_inputs(spec, image_position_ids, profile=profile, dtype=dtype)
    batch, patches = inputs.padding.shape
    ours = (inputs.mask == 0).expand(batch, 1, patches, patches)
    theirs = hf_vision_mask(model, image_position_ids)
    mismatches = int((ours != theirs).sum()) if ours.shape == theirs.shape else ours.numel()
    rows = [Row("vision inputs", "encoder mask vs create_bidirectional_mask", "mismatched entries", mismatches, 0.0)]
    valid = ~inputs.padding
    cos, sin = hf_vision_rope(model, image_position_ids, dtype)
    for name, mine, reference in (("cos", inputs.cos, cos), ("sin", inputs.sin, sin)):
        check = f"2-D RoPE {name} vs Gemma4VisionRotaryEmbedding"
        rows.append(compare("vision inputs", check, mine[valid], reference[valid], tolerances.ROPE[dtype]))
    return rows


def vision_stage_rows(
    model: Any, pixel_values: torch.Tensor, image_position_ids: torch.Tensor, *, profile: int, dtype: torch.dtype
) -> list[Row]:
    """Patch embeddings, each encoder layer, the pooled output and the soft tokens vs HF's vision tower."""
    encoder = vision_encoder(model)
    inputs = build_vision_inputs(encoder.spec, image_position_ids, profile=profile, dtype=dtype)
    hf = hf_vision_outputs(model, pixel_values, image_position_ids)
    valid = ~inputs.padding
    hidden = encoder.embed_patches(pixel_values, inputs.positions, inputs.padding)
    rows = [stage_row("vision prefill", "patch embeddings", hidden[valid], hf.patch_embeddings[valid], dtype)]
    for index, (layer, reference) in enumerate(zip(encoder.layers, hf.layers, strict=True)):
        hidden = layer(hidden, inputs.mask, inputs.cos, inputs.sin)
        rows.append(stage_row("vision prefill", f"encoder layer {index}", hidden[valid], reference[valid], dtype))
    pooled = encoder.pool(hidden, inputs.pooling)
    rows.append(stage_row("vision prefill", "pooled (pooling matrix)", pooled, hf.pooled, dtype))
    soft = encoder.project(pooled, hidden.dtype)
    ours = torch.cat([soft[image, :count] for image, count in enumerate(inputs.soft_tokens.tolist())])
    rows.append(
        stage_row("vision prefill", "soft tokens (stage) vs get_image_features", ours, torch.cat(hf.soft_tokens), dtype)
    )
    return rows
