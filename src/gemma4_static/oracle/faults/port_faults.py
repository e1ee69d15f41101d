"""Faults of a port's own shape, each in a wrapper port around this runtime that exposes what another
team's port would (RoPE, prefill masks, the token embedding, prefill with its chunk-end logits,
decode, generation) and none of this runtime's internals. Each breaks only where a chunk boundary,
a ring wrap and the window meet, beyond the fixed shapes of ``verify``'s other groups (its sample
prompt, its chunks of ``W + 1``, its decode after a single-shot prefill); the ``schedules`` grid and
the fuzzer must catch every one (``gemma4-static verify --port <module>:<Class>``). The faults of
:data:`LONG_POSITION_FAULTS` break only past 2048 positions: the ``long-positions`` group alone
must catch them."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from ...ports import Gemma4Port, ImageLimits, PortPrefill, PortSetup
from ...ports.prompt import Prompt
from ...ports.static import StaticRuntimePort
from ...runtime import StaticGemma4Runtime

MODULE = __name__


class WrappedRuntimePort(Gemma4Port):
    """This runtime seen from outside: no internals exposed (its checks are SKIP, as for any port)."""

    name = "wrapped gemma4-static"
    limits = dataclasses.replace(StaticRuntimePort.limits, images=ImageLimits())  # text, as other teams' ports
    bug = "none: this runtime as it is"

    def __init__(self, model: Any, setup: PortSetup) -> None:
        self.inner = StaticRuntimePort(model, setup, quant=setup.quant)
        self.pad_token_id = model.config.get_text_config().pad_token_id
        self.prefilling = False
        self.first_chunk: int | None = None  # the first chunk's length in the running prefill
        self.install(self.inner.runtime)

    def install(self, runtime: StaticGemma4Runtime) -> None:
        """Inject the fault into this port's own runtime (instance attributes: no other port sees it)."""

    def rope(self, position_ids: torch.Tensor, dtype: torch.dtype) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        return self.inner.rope(position_ids, dtype)

    def prefill_masks(self, attention_mask: torch.Tensor, mm_token_type_ids: Any = None) -> dict[str, torch.Tensor]:
        return self.inner.prefill_masks(attention_mask, mm_token_type_ids)

    def token_embedding(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.inner.token_embedding(input_ids)

    def prefill_schedule(self, length: int) -> list[int]:
        return self.inner.prefill_schedule(length)

    def prefill(self, prompt: Prompt, *, keep_intermediates: bool = False) -> PortPrefill:
        self.prefilling, self.first_chunk = True, None
        try:
            result = self.inner.prefill(prompt, keep_intermediates=keep_intermediates)
        finally:
            self.prefilling = False
        return PortPrefill(result.logits, chunk_logits=result.chunk_logits)

    def decode(self, next_ids: torch.Tensor) -> torch.Tensor:
        return self.inner.decode(next_ids)

    def chunk_of(self, positions: torch.Tensor) -> int:
        """The length of the prefill chunk at ``positions (B, C)``, noting the first chunk's."""
        if int(positions[0, 0]) == 0:
            self.first_chunk = positions.shape[1]
        return positions.shape[1]


class ChunkMaskOffset(WrappedRuntimePort):
    name = "fault: chunk-mask-offset"
    bug = "a chunk longer than the first gets the masks of a chunk one position earlier"

    def install(self, runtime: StaticGemma4Runtime) -> None:
        original = runtime.stack.cache_masks

        def cache_masks(positions, written, blocks=None, *, before=None):
            if before is not None and self.chunk_of(positions) > (self.first_chunk or positions.shape[1]):
                positions = positions - 1
            return original(positions, written, blocks, before=before)

        runtime.stack.cache_masks = cache_masks


class RingSlotsLongChunk(WrappedRuntimePort):
    name = "fault: ring-slots-long-chunk"
    bug = "a chunk after the first, longer than the ring plus one, writes its K/V at slots counted from its own start"

    def install(self, runtime: StaticGemma4Runtime) -> None:
        cache, original = runtime.cache, runtime.cache.slots

        def slots(layer_type, positions):
            later = positions.dim() == 2 and int(positions[0, 0]) > 0
            if cache.is_ring(layer_type) and later and positions.shape[1] > cache.capacity[layer_type] + 1:
                return (positions - positions[:, :1]) % cache.capacity[layer_type]
            return original(layer_type, positions)

        cache.slots = slots


class DecodeAfterPartialChunk(WrappedRuntimePort):
    name = "fault: decode-after-partial-chunk"
    bug = "after a prefill whose last chunk is shorter than the first, decode goes on where a full chunk would end"

    def prefill(self, prompt: Prompt, *, keep_intermediates: bool = False) -> PortPrefill:
        result = super().prefill(prompt, keep_intermediates=keep_intermediates)
        longest = int(prompt.attention_mask.sum(dim=1).max())
        chunks = self.inner.setup.chunks(longest) or self.inner.prefill_schedule(longest)
        if len(chunks) > 1 and chunks[-1] < chunks[0]:
            cache = self.inner.runtime.cache
            cache.lengths.copy_((-(-cache.lengths // chunks[0]) * chunks[0]).clamp(max=cache.max_seq))
        return result


class RingWrapCounter(WrappedRuntimePort):
    name = "fault: ring-wrap-counter"
    bug = "the ring's wrap count is kept modulo 4: after four windows, slots are read as earlier positions"

    def install(self, runtime: StaticGemma4Runtime) -> None:
        cache, original = runtime.cache, runtime.cache.key_positions

        def key_positions(layer_type, upto):
            held = original(layer_type, upto)
            if not cache.is_ring(layer_type):
                return held
            capacity = cache.capacity[layer_type]
            return torch.where(held >= 0, held % (4 * capacity), held)

        cache.key_positions = key_positions


class FirstChunkOfOne(WrappedRuntimePort):
    name = "fault: first-chunk-of-one"
    bug = "a first chunk of one token (a BOS warm-up call) is never written to the cache"

    def install(self, runtime: StaticGemma4Runtime) -> None:
        original = runtime.cache.write_plan

        def write_plan(positions, keep):
            if self.prefilling and positions.shape[1] == 1 and int(positions[0, 0]) == 0:
                keep = torch.zeros_like(keep)  # a plan that writes nothing, for every layer of the call
            return original(positions, keep)

        runtime.cache.write_plan = write_plan


class RopePositionsInHalf(WrappedRuntimePort):
    name = "fault: rope-positions-in-half"
    bug = (
        "its program casts the positions to float16 before the RoPE lookup (exact up to 2048, rounded past it); "
        "its rope hook builds exact tables"
    )

    def install(self, runtime: StaticGemma4Runtime) -> None:
        tables = runtime.stack.rope  # this runtime's own (the hook builds its tables apart)
        original, last = tables.lookup, tables.max_seq - 1
        tables.lookup = lambda positions, dtype: original(positions.half().long().clamp(max=last), dtype)


FAULTY_PORTS = (ChunkMaskOffset, RingSlotsLongChunk, DecodeAfterPartialChunk, RingWrapCounter, FirstChunkOfOne)
LONG_POSITION_FAULTS = (RopePositionsInHalf,)  # pass every group but long-positions
