"""The decoder stack over the static cache: which K/V each layer attends over, where producing
layers write theirs, and the masks and RoPE rows of the queries (all sliced from tables built once)."""

from __future__ import annotations

import torch

from .cpu.cache import StaticKVCache
from .cpu.inputs import StaticLayout
from .cpu.masks import mask_table
from .cpu.rope import RopeTables
from .npu.decoder import DecoderLayer
from .spec import ModelSpec


class LayerStack:
    """The decoder layers of one model at one static layout, with the mask table, RoPE tables and
    KV cache they read. Arguments come from the runtime itself and are not re-validated."""

    def __init__(self, spec: ModelSpec, layers: tuple[DecoderLayer, ...], layout: StaticLayout) -> None:
        self.spec, self.layers, self.layout = spec, layers, layout
        self.mask_table = mask_table(spec.text, layout.max_seq)
        self.rope = RopeTables(spec.text, layout.max_seq)
        self.cache = StaticKVCache(spec.text, batch_size=layout.batch_size, max_seq=layout.max_seq, dtype=spec.dtype)
        reusing = [index for index, source in enumerate(self.cache.sources) if source != index]
        self.first_reusing_layer = reusing[0] if reusing else len(layers)

    def masks(
        self, valid: torch.Tensor, positions: torch.Tensor | None, blocks: torch.Tensor | None = None
    ) -> dict[str, torch.Tensor]:
        """Additive masks ``{layer_type: (B, 1, C, max_seq)}`` in the model dtype (``finfo.min`` forbidden)
        for queries at ``positions (B, C)`` (``None``: all) over the ``valid (B, max_seq)`` slots."""
        fill = torch.finfo(self.spec.dtype).min
        return self.mask_table.additive_masks(valid, positions, blocks, dtype=self.spec.dtype, fill=fill)

    def run(
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
        """Run ``layers`` on ``hidden (B, S, H)`` for queries at ``slots (B, S)``; producing layers
        write their K/V where ``keep (B, S)`` holds. ``from_cache``: attend over the static cache
        (chunks, decode, the reusing tail of a prefill) instead of this step's K/V alone (single-shot
        prefill). ``states`` collects each layer's output."""
        rope = self.rope.lookup(slots, self.spec.dtype)
        produced: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        for index in layers:
            layer_type, source = self.spec.text.layer_types[index], self.cache.sources[index]
            cos, sin = rope[layer_type]
            # from the cache, or (single shot) the producer's K/V of this call; None for a producer
            kv = (self.cache.keys[source], self.cache.values[source]) if from_cache else produced.get(source)
            hidden, key, value = self.layers[index](
                hidden, per_layer_inputs[:, :, index], cos, sin, masks[layer_type], kv, slots
            )
            if source == index:
                self.cache.write(index, key, value, slots, keep)
                produced[index] = (key, value)
            if states is not None:
                states.append(hidden)
        return hidden

    def run_chunks(
        self,
        fused: torch.Tensor,
        per_layer_inputs: torch.Tensor,
        valid: torch.Tensor,
        blocks: torch.Tensor | None,
        layers: range,
    ) -> torch.Tensor:
        """Prefill ``layers`` in chunks of ``prefill_chunk`` tokens over the cache; returns
        ``(B, max_seq, H)`` (chunks past every prompt are skipped and stay zero)."""
        chunk, batch = self.layout.prefill_chunk, self.layout.batch_size
        hidden = torch.zeros_like(fused)
        slots_all = torch.arange(self.layout.max_seq)
        for start in range(0, int(valid.sum(dim=1).max()), chunk):
            span = slice(start, start + chunk)
            slots = slots_all[span].expand(batch, -1)
            masks = self.masks(valid & (slots_all < start + chunk), slots, blocks)
            hidden[:, span] = self.run(
                fused[:, span], per_layer_inputs[:, span], slots, valid[:, span], masks, layers, from_cache=True
            )
        return hidden
