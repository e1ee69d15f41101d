"""Faults of a port's host-side stages and outputs, each in a wrapper port around this runtime that
exposes what a port like TICO's would (its static inputs, decode masks and RoPE, mask value, K/V
caches, export graphs, the logits at every position). Each breaks one exposed stage and nothing the
logits of the prefill or decode depend on (the special-id fault aside, which is TICO's own), so only
the check group that judges that stage may catch it: :data:`CAUGHT_BY` names the stage whose rows
must fail, and the self-test lane shows no other stage's does (the stage's own rows name which)."""

from __future__ import annotations

import dataclasses

import torch

from ...export import StageCase
from ...ports import PortPrefill
from ...ports.prompt import Prompt
from .port_faults import WrappedRuntimePort


class HostStagesPort(WrappedRuntimePort):
    """This runtime seen from outside with its host-side stages and every-position logits exposed."""

    name = "wrapped gemma4-static, host side exposed"

    def prefill(self, prompt: Prompt, *, keep_intermediates: bool = False) -> PortPrefill:
        result = self.inner.prefill(prompt, keep_intermediates=keep_intermediates)
        return PortPrefill(result.logits, all_logits=result.all_logits, chunk_logits=result.chunk_logits)

    def static_inputs(self, prompt: Prompt) -> tuple[torch.Tensor, torch.Tensor]:
        return self.inner.static_inputs(prompt)

    def decode_masks(self, attention_mask: torch.Tensor) -> dict[str, torch.Tensor]:
        return self.inner.decode_masks(attention_mask)

    def decode_rope(self, position: int, dtype: torch.dtype) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        return self.inner.decode_rope(position, dtype)

    def mask_fill_value(self) -> float:
        return self.inner.mask_fill_value()

    def cache_kv(self, row: int, positions: list[int]) -> dict[int, tuple[torch.Tensor, torch.Tensor]]:
        return self.inner.cache_kv(row, positions)

    def export_cases(self) -> list[StageCase]:
        return self.inner.export_cases()


class PaddingWithEos(HostStagesPort):
    name = "fault: padding-with-eos"
    bug = "its static inputs pad with the EOS id instead of the pad id (masked, so the logits do not move)"

    def static_inputs(self, prompt: Prompt) -> tuple[torch.Tensor, torch.Tensor]:
        ids, valid = super().static_inputs(prompt)
        return torch.where(valid, ids, 1), valid


class DecodeWindowWide(HostStagesPort):
    name = "fault: decode-window-wide"
    bug = "the decode masks it reports let a sliding layer see one key past the window"

    def decode_masks(self, attention_mask: torch.Tensor) -> dict[str, torch.Tensor]:
        masks = super().decode_masks(attention_mask)
        sliding = masks["sliding_attention"].clone()
        first = sliding.float().argmax(dim=1)  # the window's first visible position
        sliding[torch.arange(sliding.shape[0]), (first - 1).clamp(min=0)] = True
        return {**masks, "sliding_attention": sliding}


class DecodeRopeNextPosition(HostStagesPort):
    name = "fault: decode-rope-next-position"
    bug = "its decode RoPE tables are those of the next position"

    def decode_rope(self, position: int, dtype: torch.dtype) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        return super().decode_rope(position + 1, dtype)


class MaskValueMinusOne(HostStagesPort):
    name = "fault: mask-value-minus-one"
    bug = "the additive mask value it reports is -1: masked keys would keep real weight"

    def mask_fill_value(self) -> float:
        return -1.0


class CacheOnePositionBehind(HostStagesPort):
    name = "fault: cache-one-position-behind"
    bug = "the K/V it reports for position p are those of position p - 1"

    def cache_kv(self, row: int, positions: list[int]) -> dict[int, tuple[torch.Tensor, torch.Tensor]]:
        return super().cache_kv(row, [max(0, position - 1) for position in positions])


class InPlaceUpdate(torch.nn.Module):
    """An export graph that writes into its input (as a cache update in place would) and returns it."""

    def forward(self, cache: torch.Tensor) -> torch.Tensor:
        return cache.add_(1.0)


class ExportMutatesItsInput(HostStagesPort):
    name = "fault: export-mutates-its-input"
    bug = "one of its export graphs updates its input in place: not a function of its inputs, eager and exported part"

    def export_cases(self) -> list[StageCase]:
        return [*super().export_cases(), StageCase("cache update", InPlaceUpdate(), (torch.zeros(1, 4),))]


class AllLogitsShifted(HostStagesPort):
    name = "fault: all-logits-shifted"
    bug = "its logits at every position are those of the next position (the last one repeated)"

    def prefill(self, prompt: Prompt, *, keep_intermediates: bool = False) -> PortPrefill:
        result = super().prefill(prompt, keep_intermediates=keep_intermediates)
        if result.all_logits is None:
            return result
        shifted = torch.cat((result.all_logits[:, 1:], result.all_logits[:, -1:]), dim=1)
        return PortPrefill(result.logits, all_logits=shifted, chunk_logits=result.chunk_logits)


class PlaceholdersUnmappedInDecode(HostStagesPort):
    name = "fault: placeholders-unmapped-in-decode"
    bug = "a decode step embeds an image, video or audio placeholder as itself (HF maps it to the pad id)"

    def decode(self, next_ids: torch.Tensor) -> torch.Tensor:
        runtime = self.inner.runtime
        mapping = runtime.spec
        runtime.spec = dataclasses.replace(mapping, placeholder_token_ids=())  # for this step only
        try:
            return super().decode(next_ids)
        finally:
            runtime.spec = mapping


# each fault and the stages whose rows must fail (no other stage's may)
CAUGHT_BY = {
    PaddingWithEos: ("static inputs",),
    DecodeWindowWide: ("masks decode",),
    DecodeRopeNextPosition: ("RoPE decode",),
    MaskValueMinusOne: ("mask value",),
    CacheOnePositionBehind: ("KV cache", "chunked prefill"),  # its cache after a chunked prefill too
    ExportMutatesItsInput: ("export round-trip",),
    AllLogitsShifted: ("prefill logits",),
    PlaceholdersUnmappedInDecode: ("decode steps",),
}
