"""``StaticGemma4Runtime``: the CPU-side glue that runs the NPU stages at static shapes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from transformers import Gemma4ForCausalLM, Gemma4ForConditionalGeneration

from .cache import StaticKVCache
from .config import read_text_config
from .inputs import StaticInputs, StaticLayout, build_static_inputs
from .masks import build_prefill_masks
from .rope import RopeTables
from .stages import DecoderLayer, FixedSlotFusion, LMHead, PerLayerInputs, TokenEmbedding, VisionPrefill


@dataclass(frozen=True)
class PrefillOutputs:
    """Everything a prefill computed: ``logits (B, vocab)`` at each row's last valid token; with
    ``keep_intermediates``, the stage outputs for debugging (``hidden_states``: the embeddings and
    each layer's output, ``(B, max_seq, H)`` each)."""

    logits: torch.Tensor
    inputs: StaticInputs
    embeddings: torch.Tensor | None = None
    per_layer_inputs: torch.Tensor | None = None
    soft_tokens: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None


def _unsupported(text_config: Any) -> str | None:
    if text_config.enable_moe_block:
        return "enable_moe_block=True (mixture-of-experts blocks)"
    if not text_config.hidden_size_per_layer_input:
        return "hidden_size_per_layer_input=0 (models without per-layer embeddings)"
    return None


class StaticGemma4Runtime:
    """Static-shape prefill of an HF Gemma 4 model (``Gemma4ForConditionalGeneration`` or
    ``Gemma4ForCausalLM``) with batch ``batch_size``, every row right-padded to ``max_seq``.

    Masks and RoPE come from the independent builders, K/V of producing layers land in a static
    cache, and layers that reuse K/V read the producer's output through the shared-KV map.
    """

    def __init__(
        self,
        model: Any,
        *,
        max_seq: int,
        batch_size: int = 1,
        visual_start_idx: int | None = None,
        num_visual_tokens: int | None = None,
    ) -> None:
        if isinstance(model, Gemma4ForConditionalGeneration):
            text_model = model.model.language_model
            self.vision = (
                VisionPrefill(model.model.vision_tower, model.model.embed_vision)
                if (model.model.vision_tower is not None)
                else None
            )
            self.image_token_id = model.config.image_token_id
        elif isinstance(model, Gemma4ForCausalLM):
            text_model, self.vision, self.image_token_id = model.model, None, None
        else:
            raise TypeError(
                f"model must be a Gemma4ForConditionalGeneration or Gemma4ForCausalLM, got {type(model).__name__}"
            )
        text_config = text_model.config
        if (reason := _unsupported(text_config)) is not None:
            raise ValueError(f"this Gemma 4 variant is not supported yet: {reason}")
        self.layout = StaticLayout(max_seq, batch_size, visual_start_idx, num_visual_tokens)
        if self.layout.has_image_slot and self.vision is None:
            raise ValueError("an image slot (visual_start_idx, num_visual_tokens) needs a model with a vision tower")

        self.view = read_text_config(text_config)
        self.pad_token_id = text_config.pad_token_id
        self.vocab_size = text_config.vocab_size
        self.dtype = text_model.embed_tokens.weight.dtype
        eps = text_config.rms_norm_eps
        self.embedding = TokenEmbedding(text_model.embed_tokens.weight, text_config.hidden_size**0.5)
        self.per_layer_inputs = PerLayerInputs(text_model)
        self.fusion = FixedSlotFusion(visual_start_idx) if self.layout.has_image_slot else None
        self.layers = [
            DecoderLayer(layer, reuses_kv=mode == "reuse", eps=eps)
            for layer, mode in zip(text_model.layers, self.view.kv_sharing_modes, strict=True)
        ]
        self.lm_head = LMHead(text_model.norm.weight, model.lm_head.weight, eps, text_config.final_logit_softcapping)
        self.rope = RopeTables(self.view, max_seq)
        self.cache = StaticKVCache(self.view, batch_size=batch_size, max_seq=max_seq, dtype=self.dtype)

    def build_inputs(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> StaticInputs:
        """Validate and lay out processor outputs at ``(batch_size, max_seq)``."""
        return build_static_inputs(
            input_ids,
            attention_mask,
            self.layout,
            pad_token_id=self.pad_token_id,
            vocab_size=self.vocab_size,
            image_token_id=self.image_token_id,
        )

    @torch.no_grad()
    def prefill(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        pixel_values: torch.Tensor | None = None,
        image_position_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Logits ``(B, vocab)`` at each row's last valid token; fills the static cache."""
        return self.prefill_outputs(input_ids, attention_mask, pixel_values, image_position_ids).logits

    @torch.no_grad()
    def prefill_outputs(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        pixel_values: torch.Tensor | None = None,
        image_position_ids: torch.Tensor | None = None,
        *,
        keep_intermediates: bool = False,
    ) -> PrefillOutputs:
        """:meth:`prefill` with its intermediate products (see :class:`PrefillOutputs`)."""
        inputs = self.build_inputs(input_ids, attention_mask)
        soft_tokens = self._vision(pixel_values, image_position_ids)
        embeddings = self.embedding(inputs.input_ids)
        fused = embeddings if soft_tokens is None else self.fusion(embeddings, soft_tokens)
        per_layer_inputs = self.per_layer_inputs(inputs.input_ids, fused)

        token_types = inputs.mm_token_type_ids if soft_tokens is not None else None
        masks = build_prefill_masks(self.view, inputs.valid, dtype=self.dtype, mm_token_type_ids=token_types)
        positions = torch.arange(self.layout.max_seq).expand(self.layout.batch_size, -1)
        rope = self.rope(positions, dtype=self.dtype)

        self.cache.reset()
        hidden, states, produced = fused, [fused], {}
        for index, (layer, layer_type) in enumerate(zip(self.layers, self.view.layer_types, strict=True)):
            cos, sin = rope[layer_type]
            source = self.cache.sources[index]
            hidden, key, value = layer(
                hidden, per_layer_inputs[:, :, index], cos, sin, masks[layer_type], produced.get(source)
            )
            if source == index:
                produced[index] = (key, value)
                self.cache.write_prefill(index, key, value, inputs.valid)
            states.append(hidden)
        self.cache.lengths.copy_(inputs.valid_length)

        last = hidden[torch.arange(self.layout.batch_size), inputs.valid_length - 1]
        logits = self.lm_head(last[:, None, :])[:, 0]
        if not keep_intermediates:
            return PrefillOutputs(logits=logits, inputs=inputs)
        return PrefillOutputs(
            logits=logits,
            inputs=inputs,
            embeddings=embeddings,
            per_layer_inputs=per_layer_inputs,
            soft_tokens=soft_tokens,
            hidden_states=tuple(states),
        )

    def _vision(
        self, pixel_values: torch.Tensor | None, image_position_ids: torch.Tensor | None
    ) -> torch.Tensor | None:
        """Soft tokens ``(B, num_visual_tokens, H)`` for one image per row, or ``None`` for text."""
        if pixel_values is None:
            if self.layout.has_image_slot:
                raise ValueError("the layout has an image slot: pixel_values and image_position_ids are required")
            if image_position_ids is not None:
                raise ValueError("image_position_ids given without pixel_values")
            return None
        if self.vision is None:
            raise ValueError("pixel_values given, but this model has no vision tower (text-only Gemma 4)")
        if not self.layout.has_image_slot:
            raise ValueError(
                "pixel_values given, but the layout has no image slot (visual_start_idx, num_visual_tokens)"
            )
        if image_position_ids is None:
            raise ValueError("pixel_values need image_position_ids (from the Gemma 4 image processor)")
        batch = self.layout.batch_size
        if (
            pixel_values.dim() != 3
            or pixel_values.shape[0] != batch
            or image_position_ids.shape[:2] != pixel_values.shape[:2]
        ):
            raise ValueError(
                f"pixel_values must be (batch_size={batch}, patches, channels) with image_position_ids "
                f"(batch_size, patches, 2), got {tuple(pixel_values.shape)} and {tuple(image_position_ids.shape)}"
            )
        kernel = self.vision.kernel
        soft_per_image = (image_position_ids != -1).all(dim=-1).sum(dim=-1) // kernel**2
        if (soft_per_image != self.layout.num_visual_tokens).any():
            raise ValueError(
                f"the images give {soft_per_image.tolist()} soft tokens, "
                f"but the layout's num_visual_tokens is {self.layout.num_visual_tokens}"
            )
        return self.vision(pixel_values.to(self.dtype), image_position_ids)[:, : self.layout.num_visual_tokens]
