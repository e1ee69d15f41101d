"""``StaticGemma4Runtime``: the glue that sequences the CPU side and the NPU stages.

Data flows one way: :mod:`~gemma4_static.spec` reads the model once (sizes, ids, weights);
:mod:`~gemma4_static.cpu` lays out inputs and owns the mask table, the RoPE tables and the KV
cache; :mod:`~gemma4_static.npu` stages compute. This module only decides which stage runs on
which slots.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from .cpu.cache import StaticKVCache
from .cpu.inputs import StaticInputs, StaticLayout, build_static_inputs, check_image_inputs, check_next_ids
from .cpu.masks import mask_table
from .cpu.rope import RopeTables
from .npu.stages import build_stages
from .spec import read_model


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


class StaticGemma4Runtime:
    """Static-shape prefill, decode and greedy generation of an HF Gemma 4 model
    (``Gemma4ForConditionalGeneration`` or ``Gemma4ForCausalLM``) with batch ``batch_size``, every
    row right-padded to ``max_seq``.

    Masks are rows of a table built once, RoPE comes from tables built once, K/V of producing
    layers land in a static cache, and layers that reuse K/V read the producer's buffer. With
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
        self.spec, weights = read_model(model)
        self.layout = StaticLayout(max_seq, batch_size, visual_start_idx, num_visual_tokens, prefill_chunk)
        if self.layout.has_image_slot and weights.vision_tower is None:
            raise ValueError("an image slot (visual_start_idx, num_visual_tokens) needs a model with a vision tower")
        image_slot = (visual_start_idx, num_visual_tokens) if self.layout.has_image_slot else None
        self.stages = build_stages(self.spec, weights, image_slot=image_slot)
        self.masks = mask_table(self.spec.text, max_seq)
        self.rope = RopeTables(self.spec.text, max_seq)
        self.cache = StaticKVCache(self.spec.text, batch_size=batch_size, max_seq=max_seq, dtype=self.spec.dtype)
        reusing = [index for index, source in enumerate(self.cache.sources) if source != index]
        self.first_reusing_layer = reusing[0] if reusing else self.spec.num_layers

    def build_inputs(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> StaticInputs:
        """Validate and lay out processor outputs at ``(batch_size, max_seq)``."""
        return build_static_inputs(
            input_ids,
            attention_mask,
            self.layout,
            pad_token_id=self.spec.pad_token_id,
            vocab_size=self.spec.vocab_size,
            image_token_id=self.spec.image_token_id,
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
        stages, batch = self.stages, self.layout.batch_size
        soft_tokens = None
        if check_image_inputs(
            pixel_values, image_position_ids, self.layout, pooling_kernel_size=self.spec.pooling_kernel_size
        ):
            soft_tokens = stages.vision(pixel_values, image_position_ids)[:, : self.layout.num_visual_tokens]
        embeddings = stages.embedding(inputs.input_ids)
        fused = embeddings if soft_tokens is None else stages.fusion(embeddings, soft_tokens)
        per_layer_inputs = stages.per_layer_inputs(inputs.input_ids, fused)
        blocks = None if soft_tokens is None else self.masks.vision_blocks(inputs.mm_token_type_ids)

        self.cache.reset(inputs.valid_length)
        single_shot = self.layout.prefill_chunk is None
        states = [fused] if keep_intermediates and single_shot else None
        # Layers that reuse K/V write nothing, so past the producers only the last token of each
        # row matters (as HF's generate does); intermediates keep the full depth for debugging.
        depth = self.spec.num_layers if states is not None else self.first_reusing_layer
        if single_shot:
            slots = torch.arange(self.layout.max_seq).expand(batch, -1)
            masks = self._masks(inputs.valid, None, blocks)
            hidden = self._run_layers(
                fused, per_layer_inputs, slots, inputs.valid, masks, range(depth), from_cache=False, states=states
            )
        else:
            hidden = self._prefill_chunks(fused, per_layer_inputs, inputs, blocks, range(depth))

        rows, last_index = torch.arange(batch), inputs.valid_length - 1
        last = hidden[rows, last_index][:, None]
        if depth < self.spec.num_layers:
            slots = last_index[:, None]
            last = self._run_layers(
                last,
                per_layer_inputs[rows, last_index][:, None],
                slots,
                torch.zeros_like(slots, dtype=torch.bool),
                self._masks(inputs.valid, slots, blocks),
                range(depth, self.spec.num_layers),
                from_cache=True,
            )
        logits = stages.lm_head(last)[:, 0]
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
        blocks: torch.Tensor | None,
        layers: range,
    ) -> torch.Tensor:
        """Prefill ``layers`` chunk by chunk over the cache; returns ``(B, max_seq, H)`` (chunks past
        every prompt are skipped and stay zero)."""
        chunk, batch = self.layout.prefill_chunk, self.layout.batch_size
        hidden = torch.zeros_like(fused)
        slots_all = torch.arange(self.layout.max_seq)
        for start in range(0, int(inputs.valid_length.max()), chunk):
            span = slice(start, start + chunk)
            slots = slots_all[span].expand(batch, -1)
            masks = self._masks(inputs.valid & (slots_all < start + chunk), slots, blocks)
            hidden[:, span] = self._run_layers(
                fused[:, span], per_layer_inputs[:, span], slots, inputs.valid[:, span], masks, layers, from_cache=True
            )
        return hidden

    def _masks(
        self, valid: torch.Tensor, positions: torch.Tensor | None, blocks: torch.Tensor | None = None
    ) -> dict[str, torch.Tensor]:
        """Additive masks ``{layer_type: (B, 1, C, max_seq)}`` in the model dtype (``finfo.min`` forbidden)."""
        fill = torch.finfo(self.spec.dtype).min
        return self.masks.additive_masks(valid, positions, blocks, dtype=self.spec.dtype, fill=fill)

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
        rope = self.rope.lookup(slots, self.spec.dtype)
        produced: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        for index in layers:
            layer, layer_type, source = (
                self.stages.layers[index],
                self.spec.text.layer_types[index],
                self.cache.sources[index],
            )
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
        next_ids = check_next_ids(next_ids, batch_size=self.layout.batch_size, vocab_size=self.spec.vocab_size)
        slots = self.cache.advance()[:, None]
        embeddings = self.stages.embedding(next_ids)
        per_layer_inputs = self.stages.per_layer_inputs(next_ids, embeddings)
        masks = self._masks(self.cache.valid_slots(), slots)
        everything = range(self.spec.num_layers)
        hidden = self._run_layers(
            embeddings,
            per_layer_inputs,
            slots,
            torch.ones_like(slots, dtype=torch.bool),
            masks,
            everything,
            from_cache=True,
        )
        return self.stages.lm_head(hidden)[:, 0]

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
        pad = self.spec.pad_token_id
        logits = self._prefill(inputs, pixel_values, image_position_ids).logits
        tokens = torch.full((self.layout.batch_size, max_new_tokens), pad, dtype=torch.long)
        finished = torch.zeros(self.layout.batch_size, dtype=torch.bool)
        for step in range(max_new_tokens):
            token = torch.where(finished, pad, logits.argmax(dim=-1))
            tokens[:, step] = token
            finished |= torch.isin(token, eos)
            if step + 1 == max_new_tokens or finished.all():
                break
            logits = self.decode_one(token[:, None])
        return tokens
