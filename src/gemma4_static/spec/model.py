"""HF Gemma 4 model -> :class:`ModelSpec` and :class:`ModelWeights`: model class, variant gate, sizes,
ids and the weights each stage holds. Models are recognised by their class names, so nothing here
imports ``transformers``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from .config import TextConfigView, read_text_config
from .vision import VisionSpec, read_vision
from .weights import (
    DecoderWeights,
    ExpertWeights,
    ModelWeights,
    PerLayerEmbeddingWeights,
    PerLayerInputWeights,
)

MULTIMODAL_MODEL = "Gemma4ForConditionalGeneration"
TEXT_MODEL = "Gemma4ForCausalLM"


@dataclass(frozen=True)
class ModelSpec:
    """The sizes and ids of a supported Gemma 4 model, beside its :class:`TextConfigView`.

    ``placeholder_token_ids``: the image, video and audio placeholder ids of a multimodal model,
    which HF replaces by the pad id wherever they occur (token embedding and per-layer inputs);
    ``vision`` is ``None`` without a vision tower.
    """

    text: TextConfigView
    hidden_size: int
    vocab_size: int
    per_layer_input_size: int
    rms_norm_eps: float
    final_logit_softcapping: float | None
    pad_token_id: int
    image_token_id: int | None
    placeholder_token_ids: tuple[int, ...]
    vision: VisionSpec | None
    dtype: torch.dtype

    @property
    def num_layers(self) -> int:
        return len(self.text.layer_types)


def model_class(model: Any) -> str:
    """``MULTIMODAL_MODEL`` or ``TEXT_MODEL`` for an HF Gemma 4 model (or a subclass); ``TypeError`` otherwise
    (``ValueError`` naming the variant for ``gemma4_unified``)."""
    names = {cls.__name__ for cls in type(model).__mro__}
    for name in (MULTIMODAL_MODEL, TEXT_MODEL):
        if name in names:
            return name
    if any(name.startswith("Gemma4Unified") for name in names):
        raise ValueError(
            f"gemma4_unified ({type(model).__name__}) is not supported: a separate model type whose multimodal "
            "path is an encoder-free vision embedder (patch LayerNorms, one dense projection, factorized position "
            "embeddings) instead of the vision tower this runtime implements"
        )
    raise TypeError(f"model must be a {MULTIMODAL_MODEL} or {TEXT_MODEL}, got {type(model).__name__}")


def text_module(model: Any) -> nn.Module:
    """The ``Gemma4TextModel`` inside an HF Gemma 4 model."""
    return model.model.language_model if model_class(model) == MULTIMODAL_MODEL else model.model


def read_model(model: Any) -> tuple[ModelSpec, ModelWeights]:
    """The spec and stage weights of an HF ``Gemma4ForConditionalGeneration`` / ``Gemma4ForCausalLM``:
    with or without per-layer embeddings, with or without mixture-of-experts blocks.

    ``TypeError`` for another model; ``ValueError`` naming the feature for an unsupported variant.
    """
    text = text_module(model)
    config = text.config
    multimodal = model_class(model) == MULTIMODAL_MODEL
    vision_spec, vision_weights = (read_vision(model) if multimodal else None) or (None, None)
    placeholders = ()
    if multimodal:
        ids = (model.config.image_token_id, model.config.video_token_id, model.config.audio_token_id)
        placeholders = tuple(int(token) for token in ids if token is not None)
    spec = ModelSpec(
        text=read_text_config(config),
        hidden_size=int(config.hidden_size),
        vocab_size=int(config.vocab_size),
        per_layer_input_size=int(config.hidden_size_per_layer_input or 0),
        rms_norm_eps=float(config.rms_norm_eps),
        final_logit_softcapping=config.final_logit_softcapping,
        pad_token_id=int(config.pad_token_id),
        image_token_id=model.config.image_token_id if multimodal else None,
        placeholder_token_ids=placeholders,
        vision=vision_spec,
        dtype=text.norm.weight.dtype,  # a table may stay in its stored dtype, read row-wise
    )
    per_layer = None
    if spec.per_layer_input_size:
        per_layer = PerLayerEmbeddingWeights(
            table=text.embed_tokens_per_layer.weight,
            projection=text.per_layer_model_projection.weight,
            projection_norm=text.per_layer_projection_norm.weight,
        )
    weights = ModelWeights(
        embed_tokens=text.embed_tokens.weight,
        per_layer=per_layer,
        layers=tuple(
            _decoder_weights(layer, produces=mode != "reuse")
            for layer, mode in zip(text.layers, spec.text.kv_sharing_modes, strict=True)
        ),
        final_norm=text.norm.weight,
        lm_head=model.lm_head.weight,
        vision=vision_weights,
    )
    return spec, weights


def _decoder_weights(layer: nn.Module, *, produces: bool) -> DecoderWeights:
    attention, mlp = layer.self_attn, layer.mlp
    return DecoderWeights(
        head_dim=int(attention.head_dim),
        q_proj=attention.q_proj,
        k_proj=attention.k_proj if produces else None,
        v_proj=attention.v_proj if produces else None,
        o_proj=attention.o_proj,
        q_norm=attention.q_norm.weight,
        k_norm=attention.k_norm.weight if produces else None,
        gate_proj=mlp.gate_proj,
        up_proj=mlp.up_proj,
        down_proj=mlp.down_proj,
        input_norm=layer.input_layernorm.weight,
        post_attention_norm=layer.post_attention_layernorm.weight,
        pre_feedforward_norm=layer.pre_feedforward_layernorm.weight,
        post_feedforward_norm=layer.post_feedforward_layernorm.weight,
        per_layer=_per_layer_weights(layer),
        experts=_expert_weights(layer),
        layer_scalar=layer.layer_scalar,
    )


def _per_layer_weights(layer: nn.Module) -> PerLayerInputWeights | None:
    if not layer.hidden_size_per_layer_input:
        return None
    return PerLayerInputWeights(
        gate=layer.per_layer_input_gate,
        projection=layer.per_layer_projection,
        post_norm=layer.post_per_layer_input_norm.weight,
    )


def _expert_weights(layer: nn.Module) -> ExpertWeights | None:
    if not layer.enable_moe_block:
        return None
    router, experts = layer.router, layer.experts
    return ExpertWeights(
        router_scale=router.scale,
        router_proj=router.proj.weight,
        per_expert_scale=router.per_expert_scale,
        top_k=int(router.config.top_k_experts),
        gate_up_proj=experts.gate_up_proj,
        down_proj=experts.down_proj,
        pre_norm=layer.pre_feedforward_layernorm_2.weight,
        post_norm=layer.post_feedforward_layernorm_2.weight,
        post_dense_norm=layer.post_feedforward_layernorm_1.weight,
    )
