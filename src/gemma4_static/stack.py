"""The decoder stack over the static cache: which K/V each layer attends over, where producing
layers write theirs, and the masks and RoPE rows of the queries (all sliced from tables built once).

Three ways a step attends: ``own`` (single-shot prefill: this step's K/V alone, ``max_seq`` keys),
``cache`` (decode and the prefill tail: the cache, this step's K/V placed at their slots), and
``chunk`` (chunked prefill: full layers as ``cache``; ring layers over ``[ring before the chunk |
the chunk]``, so a chunk longer than the window never overwrites keys its own queries still need).
"""

from __future__ import annotations

import torch

from .cpu.cache import StaticKVCache
from .cpu.inputs import StaticInputs
from .cpu.layout import StaticLayout
from .cpu.masks import mask_table, to_additive
from .cpu.prefill_masks import PrefillMaskBuffers
from .cpu.rope import RopeTables
from .npu.decoder import DecoderLayer
from .spec import ModelSpec

KEY_SPAN_STEP = 256  # granularity of the attention length over max_seq buffers in PyTorch cache mode


class LayerStack:
    """The decoder layers of one model at one static layout, with the mask table, RoPE tables and
    KV cache they read. Arguments come from the runtime itself and are not re-validated."""

    def __init__(self, spec: ModelSpec, layers: tuple[DecoderLayer, ...], layout: StaticLayout, fill: float) -> None:
        self.spec, self.layers, self.layout = spec, layers, layout
        self.mask_table = mask_table(spec.text, layout.max_seq)
        self.prefill_masks = PrefillMaskBuffers(
            spec.text, layout.max_seq, batch_size=layout.batch_size, dtype=spec.dtype, mask_value=fill
        )
        self.rope = RopeTables(spec.text, layout.max_seq)
        self.cache = StaticKVCache(
            spec.text,
            batch_size=layout.batch_size,
            max_seq=layout.max_seq,
            dtype=spec.dtype,
            sliding_cache=layout.sliding_cache,
        )
        reusing = [index for index, source in enumerate(self.cache.sources) if source != index]
        self.first_reusing_layer = reusing[0] if reusing else len(layers)
        self.fill = fill  # the additive mask value of forbidden keys
        # PyTorch stages write a step's K/V into the cache before attending (no copy of the cache);
        # a stage program takes the cache as an input and places the K/V itself
        self.in_place = all(isinstance(layer, DecoderLayer) for layer in layers)

    def own_masks(self, valid: torch.Tensor, blocks: torch.Tensor | None) -> dict[str, torch.Tensor]:
        """Single-shot prefill masks ``{layer_type: (B, 1, S, S)}`` over the ``valid (B, S)`` tokens
        (without a vision overlay: this stack's kept buffers, rewritten by the next prefill)."""
        if blocks is None:
            return self.prefill_masks.write(valid)
        return self.mask_table.additive_masks(valid, None, blocks, dtype=self.spec.dtype, fill=self.fill)

    def cache_masks(
        self,
        positions: torch.Tensor,
        written: torch.Tensor,
        blocks: torch.Tensor | None = None,
        *,
        before: torch.Tensor | None = None,
    ) -> dict[str, torch.Tensor]:
        """Additive masks ``{layer_type: (B, 1, C, K)}`` for queries at ``positions (B, C)`` once
        positions ``[0, written)`` of each row are in the cache (``written (B,)``). With ``before``
        (``chunk`` mode) ring layers see ``[ring holding [0, before) | this chunk's written positions]``."""
        key_positions = {}
        for name in self.mask_table.rules:
            if before is not None and self.cache.is_ring(name):
                chunk = torch.where(positions < written[:, None], positions, -1)
                key_positions[name] = torch.cat((self.cache.key_positions(name, before), chunk), dim=1)
            else:
                key_positions[name] = self.cache.key_positions(name, written)
        masks = self.mask_table.masks_at(positions, key_positions, blocks)
        return {name: to_additive(mask, dtype=self.spec.dtype, mask_value=self.fill) for name, mask in masks.items()}

    def prefill(
        self,
        fused: torch.Tensor,
        per_layer_inputs: torch.Tensor,
        inputs: StaticInputs,
        blocks: torch.Tensor | None,
        states: list[torch.Tensor] | None = None,
        chunks: list[int] | None = None,
        chunk_ends: list[torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Prefill the ``(B, max_seq, H)`` embeddings over the emptied cache, single shot or in
        ``chunks`` (lengths in order); returns each row's last valid token's output ``(B, 1, H)``.
        Layers that reuse K/V write nothing, so past the producers only each row's last token runs (as
        HF's generate does), unless ``states`` collects every layer's output (single-shot prefill
        only). ``chunk_ends`` collects, per chunk, each row's output at its last token so far."""
        batch = self.layout.batch_size
        self.cache.reset(inputs.valid_length)
        depth = self.spec.num_layers if states is not None else self.first_reusing_layer
        if chunks is None:
            positions = torch.arange(self.layout.max_seq).expand(batch, -1)
            masks = self.own_masks(inputs.valid, blocks)
            hidden = self.run(
                fused, per_layer_inputs, positions, inputs.valid, masks, range(depth), mode="own", states=states
            )
        else:
            hidden = self.run_chunks(fused, per_layer_inputs, inputs.valid, blocks, range(depth), chunks, chunk_ends)
        if depth == self.spec.num_layers:
            return hidden[torch.arange(batch), inputs.valid_length - 1][:, None]
        return self.finish(hidden, per_layer_inputs, inputs.valid_length, blocks)

    def finish(
        self, hidden: torch.Tensor, per_layer_inputs: torch.Tensor, written: torch.Tensor, blocks: torch.Tensor | None
    ) -> torch.Tensor:
        """The layers past the producers at each row's last written token (``written (B,)`` positions
        in the cache), over the cache as it is: ``(B, 1, H)``."""
        rows, last_index = torch.arange(self.layout.batch_size), (written - 1).clamp(min=0)
        positions = last_index[:, None]
        return self.run(
            hidden[rows, last_index][:, None],
            per_layer_inputs[rows, last_index][:, None],
            positions,
            torch.zeros_like(positions, dtype=torch.bool),
            self.cache_masks(positions, written, blocks),
            range(self.first_reusing_layer, self.spec.num_layers),
            mode="cache",
        )

    def run(
        self,
        hidden: torch.Tensor,
        per_layer_inputs: torch.Tensor,
        positions: torch.Tensor,
        keep: torch.Tensor,
        masks: dict[str, torch.Tensor],
        layers: range,
        *,
        mode: str,
        states: list[torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Run ``layers`` on ``hidden (B, S, H)`` for queries at ``positions (B, S)`` in ``mode`` (see the
        module docstring); producing layers write their K/V where ``keep (B, S)`` holds. ``states``
        collects each layer's output. In ``cache`` mode with every position kept, PyTorch stages
        write first and attend over the cache in place (what a stage's ``forward`` computes with
        the K/V placed into a copy), over ``max_seq`` buffers only as far as :meth:`key_span`
        (the keys left out are masked, so they weigh exactly 0 in the softmax)."""
        rope = self.rope.lookup(positions, self.spec.dtype)
        producing = any(self.cache.sources[index] == index for index in layers)
        plan = self.cache.write_plan(positions, keep) if producing else None  # once for every layer
        produced: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        length = positions.shape[1]
        in_place = mode == "cache" and self.in_place and bool(keep.all())
        span = self.key_span(positions) if in_place else None
        for index in layers:
            layer, layer_type, source = self.layers[index], self.spec.text.layer_types[index], self.cache.sources[index]
            cos, sin = rope[layer_type]
            if in_place:  # this step's K/V into the cache, then attend over the cache itself
                query, key, value = layer.attention_inputs(hidden, cos, sin)
                if source == index:
                    self.cache.write_planned(index, key, value, plan)
                keys, values = self.cache.buffers(index)
                mask = masks[layer_type]
                if not self.cache.is_ring(layer_type):  # slots past every row's position are empty
                    keys, values, mask = keys[:, :, :span], values[:, :, :span], mask[..., :span]
                hidden = layer.attend_and_feed_forward(hidden, per_layer_inputs[:, :, index], query, keys, values, mask)
                if states is not None:
                    states.append(hidden)
                continue
            if mode == "own":  # the producer's K/V of this call; None for a producer
                kv, slots = produced.get(source), positions
            elif mode == "chunk" and self.cache.is_ring(layer_type):  # reusing layers never run chunked
                kv = self.cache.buffers(index, extra=length)
                slots = (self.cache.capacity[layer_type] + torch.arange(length)).expand_as(positions)
            else:
                kv, slots = self.cache.buffers(index), self.cache.slots(layer_type, positions)
            hidden, key, value = layer(hidden, per_layer_inputs[:, :, index], cos, sin, masks[layer_type], kv, slots)
            if source == index:
                self.cache.write_planned(index, key, value, plan)
                produced[index] = (key, value)
            if states is not None:
                states.append(hidden)
        return hidden

    def key_span(self, positions: torch.Tensor) -> int:
        """How many leading slots of a ``max_seq`` buffer queries at ``positions (B, S)`` can see: the
        last position plus one, rounded up to a multiple of :data:`KEY_SPAN_STEP` (a few static
        attention lengths instead of ``max_seq``; the slots beyond are empty and masked out)."""
        needed = int(positions.max()) + 1
        return min(self.layout.max_seq, -(-needed // KEY_SPAN_STEP) * KEY_SPAN_STEP)

    def run_chunks(
        self,
        fused: torch.Tensor,
        per_layer_inputs: torch.Tensor,
        valid: torch.Tensor,
        blocks: torch.Tensor | None,
        layers: range,
        chunks: list[int],
        chunk_ends: list[torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Prefill ``layers`` (producers only) in ``chunks`` (lengths in order, covering the longest
        row) over the cache; returns ``(B, max_seq, H)`` (positions past every chunk stay zero). With
        ``chunk_ends``, after each chunk the layers past the producers also run at each row's last
        token so far (:meth:`finish`), collected there ``(B, 1, H)``."""
        batch, max_seq = self.layout.batch_size, self.layout.max_seq
        hidden = torch.zeros_like(fused)
        lengths = valid.sum(dim=1)
        start = 0
        for chunk in chunks:
            span = slice(start, min(start + chunk, max_seq))
            positions = torch.arange(span.start, span.stop).expand(batch, -1)
            before, written = lengths.clamp(max=start), lengths.clamp(max=span.stop)
            masks = self.cache_masks(positions, written, blocks, before=before)
            hidden[:, span] = self.run(
                fused[:, span], per_layer_inputs[:, span], positions, valid[:, span], masks, layers, mode="chunk"
            )
            if chunk_ends is not None:
                chunk_ends.append(self.finish(hidden, per_layer_inputs, written, blocks))
            start = span.stop
        return hidden
