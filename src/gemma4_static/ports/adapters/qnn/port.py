"""Qualcomm's static Gemma 4 for its NPU (``executorch.examples.qualcomm.oss_scripts.gemma4``, in the
``executorch`` wheel) as a port, eager, float32, batch 1, no padding, text only.

Its model is ``Gemma4TextModelWrapper``: a static graph of ``ar_len`` tokens taking additive masks
(causal for full layers, sliding for sliding layers), positions and the K/V caches of its 15
producing ("self decoder") layers as inputs, and returning the logits and only the new K/V. The
host side is driven as its own ``masking_utils`` define it ("smart mask": position ``p`` lives in
cache slot ``p``; after each call the new K/V are written at their positions and
``smart_mask_update(pos, n)`` opens those slots): a prefill program of ``ar_len`` tokens (the
setup's schedule's chunk length, else its runner's ``--prefill_ar_len`` default of 32, at most
``max_seq - 1``), fed the prompt in chunks of ``ar_len`` (the last padded), and a decode program
with ``ar_len = 1``, sharing one cache (its hybrid mode).

Its package ``__init__`` chain (``oss_scripts/llama``) imports Qualcomm backend modules and
``torchtune``; the Gemma 4 modules are imported with that package's ``__init__`` left unrun (a
package stub over the same folder), so only what Gemma 4 uses is loaded. Weights come through the
upstream converter (``convert_hf_to_custom``) and Qualcomm's own ``remap_keys``, loaded with the
same allow-list of keys KV-shared layers lack as the ExecuTorch port."""

from __future__ import annotations

import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

from ....cpu.schedule import chunk_starts, expand_schedule
from ....spec import text_module
from ... import Gemma4Port, NotExposed, PortPrefill, PortSetup, Prompt
from ...capabilities.host_stages import appended_to_absolute
from ...checkpoint_layout import save_released_layout
from ...limits import BatchLimits, ChunkLimits, PortLimits, SchemeLimits
from ..executorch.config import executorch_config, quiet_converter, text_decoder_placeholders
from .pt2e import RECIPES, SCHEMES, StaticPrograms, prefill_and_decode
from .support import mask_update_defect, stub_package

LLAMA_PACKAGE = "executorch.examples.qualcomm.oss_scripts.llama"
PREFILL_AR_LEN = 32  # oss_scripts/llama/llama.py: --prefill_ar_len's default


class QnnGemma4Port(Gemma4Port):
    """Qualcomm's ``Gemma4TextModelWrapper`` driven as its static runtime drives it."""

    name = "qnn-gemma4"
    # its prefill program's ar_len is fixed when it is built: every chunk but the last that long
    limits = PortLimits(
        batch=BatchLimits(max_batch=1, padding_side=None),
        dtypes=(torch.float32,),
        chunks=ChunkLimits(chunked=True, uniform=True),
        schemes=SchemeLimits(SCHEMES, RECIPES),  # its 16a8w PT2E recipe, calibrated on the suite's rows (pt2e)
    )

    def __init__(self, model: Any, setup: PortSetup) -> None:
        stub_package(LLAMA_PACKAGE)
        from executorch.examples.models.gemma4.text_decoder import convert_hf_to_custom
        from executorch.examples.qualcomm.oss_scripts.gemma4.model_wrapper import Gemma4TextModelWrapper
        from executorch.examples.qualcomm.oss_scripts.gemma4.text_decoder.convert_weights import remap_keys
        from executorch.examples.qualcomm.oss_scripts.llama import masking_utils

        if setup.batch_size != 1 or setup.image_slots:
            raise ValueError(f"{self.name} takes batch 1 and text only, got {setup}")
        self.version = metadata.version("executorch")
        self.masking = masking_utils
        schedule = setup.prefill_schedule or (PREFILL_AR_LEN,)
        self.chunk = max(1, min(max(schedule), setup.max_seq - 1))
        self.context = setup.max_seq + self.chunk  # room for a full last chunk past the prompt
        self.config, self.model_config = executorch_config(model, setup.max_seq), model.config
        self.config.max_context_len = self.context
        self.config.max_batch_size = 1
        with tempfile.TemporaryDirectory() as folder, quiet_converter():
            save_released_layout(model, Path(folder))
            state = remap_keys(convert_hf_to_custom(folder, self.config))
        expected_missing = {
            f"model.cross_decoder.layers.{index}.attention.{name}.weight"
            for index in range(self.config.num_cross_decoder_layers)
            for name in ("k_proj", "v_proj", "k_norm")
        }
        dtype = text_module(model).embed_tokens.weight.dtype
        self.programs = {}
        for ar_len in (self.chunk, 1):
            wrapper = Gemma4TextModelWrapper(self.config, ar_len=ar_len).eval()
            result = wrapper.load_state_dict(state, strict=False)
            missing = set(result.missing_keys) - expected_missing
            if missing or result.unexpected_keys:
                raise ValueError(
                    f"{self.name} did not load cleanly: missing {sorted(missing)}, unexpected {result.unexpected_keys}"
                )
            self.programs[ar_len] = wrapper.to(dtype)
        self.pad_token_id = model.config.get_text_config().pad_token_id
        self._reset()
        self.static = (
            None
            if setup.quant is None
            else StaticPrograms(self.programs, self._inputs, self.config.num_self_decoder_layers)
        )

    def calibrate(self, prompts: list[Prompt]) -> None:
        if self.static is None:
            raise ValueError(f"{self.name} was built in float (setup.quant None): nothing to calibrate")
        self.static.calibrate(lambda: [prefill_and_decode(self, prompt) for prompt in prompts])
        self._reset()  # no conversation left: the next call must be a prefill

    def observed_ranges(self) -> dict[str, tuple[float, float]]:
        if self.static is None or not self.static.ranges:
            raise NotExposed(f"{self.name} has no calibrated ranges (built in float)")
        return self.static.ranges

    def explain(self, row: Any) -> str | None:
        """A placeholder row on a multimodal model (:func:`.config.text_decoder_placeholders`);
        the divergence of its ``masking_utils`` (docs/findings.md),
        only while :func:`mask_update_defect` still reproduces it on the installed version: a
        decode, generation, schedules or fuzz row (each runs a program after its first call), its decode
        masks, the cache decode steps wrote, or a row
        naming ``masking_utils`` (the ``IndexError`` of a program of ``ar_len > 1`` after its first
        call)."""
        placeholders = text_decoder_placeholders(self.name, row, self.model_config)
        after_a_call = ("masks decode", "decode steps", "generation", "schedules", "fuzz")
        cache_after = row.stage == "KV cache" and "decode steps" in row.check  # written by decode steps
        if placeholders or ("masking_utils" not in row.detail + row.raised and row.stage not in after_a_call):
            return placeholders or (mask_update_defect(self.masking) if cache_after else None)
        return mask_update_defect(self.masking)

    def _reset(self) -> None:
        heads, layers = self.config.num_key_value_heads, range(self.config.num_self_decoder_layers)
        dims = [self.config.get_head_dim(i) for i in layers]
        self.k_cache = [torch.zeros(1, heads, dim, self.context) for dim in dims]
        self.v_cache = [torch.zeros(1, heads, self.context, dim) for dim in dims]
        self.position = 0

    def _masks(self, ar_len: int) -> Any:
        """The masks of a program of ``ar_len`` tokens at the current position, built and updated by
        Qualcomm's ``masking_utils`` as its runner does: fresh masks, then one smart update over the
        ``position`` slots written so far."""
        masking = self.masking
        masks = masking.AttentionMask(
            [
                masking.CausalAttentionMask(1, ar_len, self.context),
                masking.SlidingWindowAttentionMask(1, ar_len, self.context, sliding_window=self.config.sliding_window),
            ]
        )
        if self.position:
            masks.smart_mask_update(0, self.position)
        return masks

    @torch.no_grad()
    def _call(self, tokens: torch.Tensor) -> torch.Tensor:
        """One program call on ``tokens (1, n)`` (``n`` <= its ``ar_len``; padded with the pad id):
        the logits of the ``n`` tokens; their K/V written at their positions."""
        count = tokens.shape[1]
        ar_len = 1 if count == 1 else self.chunk
        program = self.programs[ar_len] if self.static is None else self.static.graphs[ar_len]
        logits, new_k, new_v = program(*self._inputs(ar_len, tokens))
        end = self.position + count
        for layer, (k, v) in enumerate(zip(new_k, new_v, strict=True)):
            self.k_cache[layer][..., self.position : end] = k[..., :count]
            self.v_cache[layer][:, :, self.position : end] = v[:, :, :count]
        self.position = end
        return logits[:, :count]

    def prefill_masks(
        self, attention_mask: torch.Tensor, mm_token_type_ids: torch.Tensor | None = None
    ) -> dict[str, torch.Tensor]:
        """Its mask builders for one program call over a whole unpadded row (``ar_len`` = context
        = the row's length, nothing cached)."""
        if attention_mask.shape[0] != 1 or not bool(attention_mask.bool().all()):
            raise NotExposed(f"{self.name} takes one unpadded row")
        if mm_token_type_ids is not None and bool(mm_token_type_ids.any()):
            raise NotExposed(f"{self.name} has no image blocks (text only)")
        length, masking = attention_mask.shape[1], self.masking
        causal = masking.CausalAttentionMask(1, length, length).mask
        window = masking.SlidingWindowAttentionMask(1, length, length, sliding_window=self.config.sliding_window).mask
        return {"full_attention": causal == 0, "sliding_attention": window == 0}

    def rope(self, position_ids: torch.Tensor, dtype: torch.dtype) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """Its precomputed tables (half width, non-rotated pairs zero-padded) in HF's layout."""
        wrapper, tables = self.programs[1], {}
        for layer_type, prefix in (("full_attention", "global"), ("sliding_attention", "local")):
            cos, sin = (getattr(wrapper, f"{prefix}_freqs_{part}")[position_ids] for part in ("cos", "sin"))
            tables[layer_type] = (torch.cat((cos, cos), dim=-1).to(dtype), torch.cat((sin, sin), dim=-1).to(dtype))
        return tables

    def decode_masks(self, attention_mask: torch.Tensor) -> dict[str, torch.Tensor]:
        """Its decode program's masks as its runner builds them after ``P`` tokens (fresh masks and one
        smart update), over its cache slots then the new token's: over absolute positions."""
        if attention_mask.shape[0] != 1 or not bool(attention_mask.bool().all()):
            raise NotExposed(f"{self.name} decodes one unpadded row")
        kept, self.position = self.position, attention_mask.shape[1] - 1
        try:
            causal, sliding = self._masks(1)
        finally:
            self.position, past = kept, attention_mask.shape[1] - 1
        return {
            name: appended_to_absolute(mask[:, 0, 0] == 0, past)
            for name, mask in (("full_attention", causal), ("sliding_attention", sliding))
        }

    def decode_rope(self, position: int, dtype: torch.dtype) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        return self.rope(torch.tensor([[position]]), dtype)

    def mask_fill_value(self) -> float:
        return float(self.masking.PADDING_MASK_VALUE)

    def cache_kv(self, row: int, positions: list[int]) -> dict[int, tuple[torch.Tensor, torch.Tensor]]:
        """Its host-held caches of the producing ("self decoder") layers: K as ``(heads, dim,
        slots)``, V as ``(heads, slots, dim)``, slot ``p`` holding position ``p``."""
        index = torch.tensor(positions)
        return {
            layer: (k[row][..., index].transpose(-1, -2), v[row][:, index])
            for layer, (k, v) in enumerate(zip(self.k_cache, self.v_cache, strict=True))
        }

    def _inputs(self, ar_len: int, tokens: torch.Tensor | None = None) -> tuple:
        """A call's inputs to its program of ``ar_len`` at the current position (``tokens`` padded
        with the pad id; none: all pad, an export's example)."""
        padded = torch.full((1, ar_len), self.pad_token_id, dtype=torch.int32)
        if tokens is not None:
            padded[:, : tokens.shape[1]] = tokens
        positions = torch.arange(self.position, self.position + ar_len, dtype=torch.int32)[None]
        slots = self.context - ar_len
        caches = [k[..., :slots] for k in self.k_cache] + [v[:, :, :slots] for v in self.v_cache]
        return (padded, *self._masks(ar_len), positions, *caches)

    def token_embedding(self, input_ids: torch.Tensor) -> torch.Tensor:
        decoder = self.programs[1].model.self_decoder
        return decoder.embed_tokens(input_ids) * decoder.embed_scale

    def prefill_schedule(self, length: int) -> list[int]:
        """Its runner's policy: chunks of its prefill program's ``ar_len``."""
        return expand_schedule((self.chunk,), length)

    def prefill(self, prompt: Prompt, *, keep_intermediates: bool = False) -> PortPrefill:
        """Chunks of ``ar_len`` through the prefill program (a chunk of one token through the decode
        program); the logits of each chunk's last token, no other intermediates (its programs return
        only the logits and the new K/V)."""
        ids = self._one_text_row(prompt)
        self._reset()
        chunks = self.prefill_schedule(ids.shape[1])
        starts = chunk_starts(chunks)
        ends = [self._call(ids[:, start : start + chunk])[:, -1] for start, chunk in zip(starts, chunks, strict=True)]
        return PortPrefill(ends[-1], chunk_logits=tuple(ends) if keep_intermediates else None)

    def decode(self, next_ids: torch.Tensor) -> torch.Tensor:
        if self.position == 0:
            raise ValueError(f"{self.name}: decode needs a prefill first")
        return self._call(next_ids)[:, -1]
