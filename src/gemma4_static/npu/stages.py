"""All NPU-side stages of one model at one static layout, built from the spec and its weights."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..spec import ModelSpec, ModelWeights
from .decoder import DecoderLayer
from .embedding import NoPerLayerInputs, PerLayerInputs, TokenEmbedding
from .fusion import FixedSlotFusion
from .lm_head import LMHead
from .vision import VisionEncoder


@dataclass(frozen=True)
class Stages:
    """The fixed-shape stages a deployment runs; ``vision`` is ``None`` for a text-only model and
    ``fusions`` holds one fusion per image slot (none without); ``per_layer_inputs`` is :class:`NoPerLayerInputs` (no
    NPU stage) for a model without per-layer embeddings."""

    embedding: TokenEmbedding
    per_layer_inputs: PerLayerInputs | NoPerLayerInputs
    vision: VisionEncoder | None
    fusions: tuple[FixedSlotFusion, ...]
    layers: tuple[DecoderLayer, ...]
    lm_head: LMHead


def build_stages(spec: ModelSpec, weights: ModelWeights, *, image_slots: tuple[tuple[int, int], ...]) -> Stages:
    """The stages of ``spec``; ``image_slots`` are the layout's ``(start, tokens)`` pairs."""
    vision = None if weights.vision is None else VisionEncoder(spec.vision, weights.vision)
    return Stages(
        embedding=TokenEmbedding(weights.embed_tokens, spec.hidden_size**0.5, spec.dtype),
        per_layer_inputs=(
            NoPerLayerInputs(spec.num_layers) if weights.per_layer is None else PerLayerInputs(spec, weights.per_layer)
        ),
        vision=vision,
        fusions=tuple(FixedSlotFusion(*slot, spec.hidden_size, spec.dtype) for slot in image_slots),
        layers=tuple(
            DecoderLayer(layer, eps=spec.rms_norm_eps, num_kv_heads=spec.text.spec(layer_type).num_kv_heads)
            for layer, layer_type in zip(weights.layers, spec.text.layer_types, strict=True)
        ),
        lm_head=LMHead(weights.final_norm, weights.lm_head, spec.rms_norm_eps, spec.final_logit_softcapping),
    )


def runs_on_npu(stage: object) -> bool:
    """Whether ``stage`` is deployed (a stage that only fills an empty tensor, like a model's missing
    per-layer inputs, stays on the CPU side)."""
    return getattr(stage, "runs_on_npu", True)


def compiled_stages(stages: Stages, compile_stage: Callable[[str, Any], Any]) -> Stages:
    """A copy of ``stages`` whose every deployed stage (:func:`runs_on_npu`) is ``compile_stage(name,
    stage)``: the name its programs are known by (``token_embedding``, ``layer03``, ...)."""

    def wrap(name: str, stage: Any) -> Any:
        return stage if stage is None or not runs_on_npu(stage) else compile_stage(name, stage)

    return dataclasses.replace(
        stages,
        embedding=wrap("token_embedding", stages.embedding),
        per_layer_inputs=wrap("per_layer_inputs", stages.per_layer_inputs),
        vision=wrap("vision_prefill", stages.vision),
        fusions=tuple(wrap(f"fusion{index}", fusion) for index, fusion in enumerate(stages.fusions)),
        layers=tuple(wrap(f"layer{index:02d}", layer) for index, layer in enumerate(stages.layers)),
        lm_head=wrap("lm_head", stages.lm_head),
    )
