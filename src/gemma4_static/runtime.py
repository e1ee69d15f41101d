"""``StaticGemma4Runtime``: the CPU-side glue that runs the NPU stages at static shapes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from transformers import Gemma4ForCausalLM, Gemma4ForConditionalGeneration

from .cache import StaticKVCache
from .config import read_text_config
from .inputs import StaticInputs, StaticLayout, build_static_inputs
from .masks import build_chunk_masks, build_decode_masks, build_prefill_masks
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


def _check_chunk(prefill_chunk: int | None, layout: StaticLayout) -> int | None:
    """A chunk length must tile ``max_seq`` and keep the image slot inside one chunk (its tokens
    attend to each other bidirectionally, which a chunk cannot do across a later chunk)."""
    if prefill_chunk is None:
        return None
    if not isinstance(prefill_chunk, int) or isinstance(prefill_chunk, bool) or prefill_chunk < 1:
        raise ValueError(f"prefill_chunk must be a positive int or None, got {prefill_chunk!r}")
    if layout.max_seq % prefill_chunk:
        raise ValueError(f"prefill_chunk={prefill_chunk} must divide max_seq={layout.max_seq}")
    if layout.has_image_slot:
        first, last = layout.visual_start_idx, layout.visual_start_idx + layout.num_visual_tokens - 1
        if first // prefill_chunk != last // prefill_chunk:
            raise ValueError(
                f"the image slot [{first}, {last + 1}) crosses a boundary of prefill_chunk={prefill_chunk}; "
                "choose visual_start_idx and prefill_chunk so that the image lies inside one chunk"
            )
    return prefill_chunk


def _unsupported(text_config: Any) -> str | None:
    if text_config.enable_moe_block:
        return "enable_moe_block=True (mixture-of-experts blocks)"
    if not text_config.hidden_size_per_layer_input:
        return "hidden_size_per_layer_input=0 (models without per-layer embeddings)"
    return None


class StaticGemma4Runtime:
    """Static-shape prefill, decode and greedy generation of an HF Gemma 4 model
    (``Gemma4ForConditionalGeneration`` or ``Gemma4ForCausalLM``) with batch ``batch_size``, every
    row right-padded to ``max_seq``.

    Masks and RoPE come from the independent builders, K/V of producing layers land in a static
    cache, and layers that reuse K/V read the producer's output through the shared-KV map. With
    ``prefill_chunk`` the prompt is prefilled in fixed chunks of that many tokens over the cache.
    After a prefill, :meth:`decode_one` advances every row by one token at its own position.
    """

    def __init__(
        self,
        model: Any,
        *,
        max_seq: int,
        batch_size: int = 1,
        visual_start_idx: int | None = None,
        num_visual_tokens: int | None = None,
        prefill_chunk: int | None = None,
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

        self.prefill_chunk = _check_chunk(prefill_chunk, self.layout)
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
        reusing = [index for index, source in enumerate(self.cache.sources) if source != index]
        self.first_reusing_layer = reusing[0] if reusing else len(self.layers)

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
        """:meth:`prefill` with its intermediate products (see :class:`PrefillOutputs`; the per-layer
        hidden states are kept by single-shot prefill only)."""
        inputs = self.build_inputs(input_ids, attention_mask)
        return self._prefill(inputs, pixel_values, image_position_ids, keep_intermediates=keep_intermediates)

    def _prefill(
        self,
        inputs: StaticInputs,
        pixel_values: torch.Tensor | None,
        image_position_ids: torch.Tensor | None,
        *,
        keep_intermediates: bool = False,
    ) -> PrefillOutputs:
        soft_tokens = self._vision(pixel_values, image_position_ids)
        embeddings = self.embedding(inputs.input_ids)
        fused = embeddings if soft_tokens is None else self.fusion(embeddings, soft_tokens)
        per_layer_inputs = self.per_layer_inputs(inputs.input_ids, fused)
        token_types = inputs.mm_token_type_ids if soft_tokens is not None else None

        self.cache.reset()
        single_shot = self.prefill_chunk is None
        states = [fused] if keep_intermediates and single_shot else None
        # Layers that reuse K/V write nothing, so past the producers only the last token of each
        # row matters (as HF's generate does); intermediates keep the full depth for debugging.
        depth = len(self.layers) if states is not None else self.first_reusing_layer
        if single_shot:
            masks = build_prefill_masks(self.view, inputs.valid, dtype=self.dtype, mm_token_type_ids=token_types)
            slots = torch.arange(self.layout.max_seq).expand(self.layout.batch_size, -1)
            hidden = self._run_layers(
                fused, per_layer_inputs, slots, inputs.valid, masks, range(depth), from_cache=False, states=states
            )
        else:
            hidden = self._prefill_chunks(fused, per_layer_inputs, inputs, token_types, range(depth))
        self.cache.lengths.copy_(inputs.valid_length)

        rows, last_index = torch.arange(self.layout.batch_size), inputs.valid_length - 1
        last = hidden[rows, last_index][:, None]
        if depth < len(self.layers):
            slots = last_index[:, None]
            masks = build_chunk_masks(self.view, inputs.valid, slots, dtype=self.dtype, mm_token_type_ids=token_types)
            last = self._run_layers(
                last,
                per_layer_inputs[rows, last_index][:, None],
                slots,
                torch.zeros_like(slots, dtype=torch.bool),
                masks,
                range(depth, len(self.layers)),
                from_cache=True,
            )
        logits = self.lm_head(last)[:, 0]
        if not keep_intermediates:
            return PrefillOutputs(logits=logits, inputs=inputs)
        return PrefillOutputs(
            logits=logits,
            inputs=inputs,
            embeddings=embeddings,
            per_layer_inputs=per_layer_inputs,
            soft_tokens=soft_tokens,
            hidden_states=None if states is None else tuple(states),
        )

    def _prefill_chunks(
        self,
        fused: torch.Tensor,
        per_layer_inputs: torch.Tensor,
        inputs: StaticInputs,
        token_types: torch.Tensor | None,
        layers: range,
    ) -> torch.Tensor:
        """Prefill ``layers`` chunk by chunk over the cache; returns ``(B, max_seq, H)`` (chunks past
        every prompt are skipped and stay zero)."""
        chunk, batch = self.prefill_chunk, self.layout.batch_size
        hidden = torch.zeros_like(fused)
        slots_all = torch.arange(self.layout.max_seq)
        for start in range(0, int(inputs.valid_length.max()), chunk):
            span = slice(start, start + chunk)
            slots = slots_all[span].expand(batch, -1)
            written = inputs.valid & (slots_all < start + chunk)
            masks = build_chunk_masks(self.view, written, slots, dtype=self.dtype, mm_token_type_ids=token_types)
            hidden[:, span] = self._run_layers(
                fused[:, span], per_layer_inputs[:, span], slots, inputs.valid[:, span], masks, layers, from_cache=True
            )
        return hidden

    def _run_layers(
        self,
        hidden: torch.Tensor,
        per_layer_inputs: torch.Tensor,
        slots: torch.Tensor,
        keep: torch.Tensor,
        masks: dict[str, torch.Tensor],
        layers: range,
        *,
        from_cache: bool,
        states: list[torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Run decoder ``layers`` on queries at ``slots (B, S)``; producing layers write their K/V
        where ``keep (B, S)`` holds. ``from_cache``: attend over the static cache (chunks, decode,
        the reusing tail of a prefill) instead of this step's K/V alone (single-shot prefill)."""
        rope = self.rope(slots, dtype=self.dtype)
        produced: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        for index in layers:
            layer, layer_type, source = self.layers[index], self.view.layer_types[index], self.cache.sources[index]
            cos, sin = rope[layer_type]
            # from the cache, or (single shot) the producer's K/V of this call; None for a producer
            kv = (self.cache.keys[source], self.cache.values[source]) if from_cache else produced.get(source)
            hidden, key, value = layer(hidden, per_layer_inputs[:, :, index], cos, sin, masks[layer_type], kv, slots)
            if source == index:
                self.cache.write(index, key, value, slots, keep)
                produced[index] = (key, value)
            if states is not None:
                states.append(hidden)
        return hidden

    @torch.no_grad()
    def decode_one(self, next_ids: torch.Tensor) -> torch.Tensor:
        """Feed one token per row ``(B, 1)`` at each row's next position; returns logits ``(B, vocab)``.

        Raises ``ValueError`` ("cache is full") when a row already holds ``max_seq`` tokens.
        """
        batch = self.layout.batch_size
        if not isinstance(next_ids, torch.Tensor) or next_ids.dtype not in (torch.int32, torch.int64):
            raise TypeError(f"next_ids must be an integer torch.Tensor of shape (B, 1), got {next_ids!r}")
        if next_ids.shape != (batch, 1):
            raise ValueError(f"next_ids must have shape (batch_size, 1) = ({batch}, 1), got {tuple(next_ids.shape)}")
        if ((next_ids < 0) | (next_ids >= self.vocab_size)).any():
            raise ValueError(
                f"next_ids hold ids outside the vocabulary [0, {self.vocab_size}): {next_ids.flatten().tolist()}"
            )
        positions = self.cache.next_slots()
        next_ids = next_ids.long()
        embeddings = self.embedding(next_ids)
        per_layer_inputs = self.per_layer_inputs(next_ids, embeddings)
        written = torch.arange(self.layout.max_seq)[None, :] <= positions[:, None]
        masks = build_decode_masks(self.view, written, positions, dtype=self.dtype)
        slots = positions[:, None]
        hidden = self._run_layers(
            embeddings,
            per_layer_inputs,
            slots,
            torch.ones_like(slots, dtype=torch.bool),
            masks,
            range(len(self.layers)),
            from_cache=True,
        )
        self.cache.lengths += 1
        return self.lm_head(hidden)[:, 0]

    @torch.no_grad()
    def generate(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        *,
        max_new_tokens: int,
        eos_token_id: int | list[int] | None = None,
        pixel_values: torch.Tensor | None = None,
        image_position_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Greedy generation: the new tokens only, ``(B, max_new_tokens)``.

        A row that produced an EOS id continues with ``pad_token_id`` while the others go on;
        ``eos_token_id=None`` never stops early. ``ValueError`` when a prompt plus
        ``max_new_tokens`` exceeds ``max_seq``.
        """
        if not isinstance(max_new_tokens, int) or isinstance(max_new_tokens, bool) or max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be a positive int, got {max_new_tokens!r}")
        inputs = self.build_inputs(input_ids, attention_mask)
        longest = int(inputs.valid_length.max())
        if longest + max_new_tokens > self.layout.max_seq:
            raise ValueError(
                f"prompt length {longest} + max_new_tokens {max_new_tokens} exceeds max_seq={self.layout.max_seq}"
            )
        eos = torch.tensor([] if eos_token_id is None else eos_token_id, dtype=torch.long).flatten()
        logits = self._prefill(inputs, pixel_values, image_position_ids).logits
        tokens = torch.full((self.layout.batch_size, max_new_tokens), self.pad_token_id, dtype=torch.long)
        finished = torch.zeros(self.layout.batch_size, dtype=torch.bool)
        for step in range(max_new_tokens):
            token = torch.where(finished, self.pad_token_id, logits.argmax(dim=-1))
            tokens[:, step] = token
            finished |= torch.isin(token, eos)
            if step + 1 == max_new_tokens or finished.all():
                break
            logits = self.decode_one(token[:, None])
        return tokens

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
        return self.vision(pixel_values, image_position_ids)[:, : self.layout.num_visual_tokens]
