"""ExecuTorch's own Gemma 4 text decoder (``executorch.examples.models.gemma4.text_decoder``, in
the ``executorch`` wheel) as a port: batch 1, no padding, text only, its in-program KV cache
(``max_seq`` slots per producing layer, written at ``input_pos``), its masks and RoPE.

Built the way its own export does: its config (from the live HF config object: its ``from_json``
predates the per-layer config layout of transformers >= 5.15), its weights from an HF checkpoint
folder through its own ``convert_hf_to_custom`` (the model is saved in the released checkpoints'
key layout first), loaded with an explicit allow-list of the keys it may miss: KV-shared layers
have no K/V weights in HF checkpoints (never a blanket ``strict=False``: a wrong head count would
then load silently).

In a dynamic integer scheme (``setup.quant``, one of :data:`~gemma4_static.quant.schemes.PORT_SCHEMES`)
it is quantized by its export's own recipe, eager, with a float switch per group
(:mod:`.recipe`); in the static ``a8w8`` by ExecuTorch's PT2E XNNPACK quantizer,
calibrated on the suite's prompts (:mod:`.pt2e`)."""

from __future__ import annotations

import copy
import dataclasses
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

from ....cpu.schedule import chunk_starts, expand_schedule
from ....quant.schemes import PORT_SCHEMES
from ....spec import text_module
from ... import Gemma4Port, NotExposed, PortPrefill, PortSetup, Prompt
from ...checkpoint_layout import save_released_layout
from ...hooks import captured_layers, captured_output
from ...limits import BatchLimits, ChunkLimits, Contracts, PortLimits, SchemeLimits
from . import pt2e as executorch_pt2e
from .config import executorch_config, quiet_converter, rounded_rope_reason, text_decoder_placeholders
from .recipe import quantization_switches, quantized_by_its_recipe


class ExecuTorchGemma4Port(Gemma4Port):
    """``Gemma4ForCausalLM`` of ExecuTorch's Gemma 4 example, eager, float32."""

    name = "executorch-gemma4"
    # any schedule (its model takes any number of tokens at their positions), up to max_seq_len - 1 a call
    limits = PortLimits(
        batch=BatchLimits(max_batch=1, padding_side=None),
        dtypes=(torch.float32, torch.bfloat16, torch.float16),
        chunks=ChunkLimits(chunked=True),
        schemes=SchemeLimits(PORT_SCHEMES + executorch_pt2e.SCHEMES, executorch_pt2e.RECIPES),
        # its own model in float32 (randomly initialized, then loaded), the checkpoint written for its
        # converter and the converted state: two instances built one after the other at E2B's real
        # widths (6 layers, 1.04 billion parameters, float32 profile) peaked 16.0 GB above the model
        bytes_per_parameter=16.0,
    )

    def __init__(self, model: Any, setup: PortSetup) -> None:
        from executorch.examples.models.gemma4.text_decoder import convert_hf_to_custom
        from executorch.examples.models.gemma4.text_decoder.gemma4_transformer import Gemma4ForCausalLM

        if setup.batch_size != 1 or setup.image_slots:
            raise ValueError(f"{self.name} takes batch 1 and text only, got {setup}")
        self.version = metadata.version("executorch")
        self.setup = setup
        chunks = dataclasses.replace(self.limits.chunks, max_length=max(1, setup.max_seq - 1))
        self.limits = dataclasses.replace(self.limits, chunks=chunks)
        self.config, self.model_config = executorch_config(model, setup.max_seq), model.config
        self.model = Gemma4ForCausalLM(self.config).eval()
        with tempfile.TemporaryDirectory() as folder, quiet_converter():
            save_released_layout(model, Path(folder))
            state = convert_hf_to_custom(folder, self.config)
        expected_missing = {
            f"model.cross_decoder.layers.{index}.self_attn.{name}.weight"
            for index in range(self.config.num_cross_decoder_layers)
            for name in ("k_proj", "v_proj", "k_norm")
        }
        result = self.model.load_state_dict(state, strict=False)
        missing = set(result.missing_keys) - expected_missing
        if missing or result.unexpected_keys:
            raise ValueError(
                f"{self.name} did not load cleanly: missing {sorted(missing)}, unexpected {result.unexpected_keys}"
            )
        self.model.to(text_module(model).embed_tokens.weight.dtype)
        self.switches: dict[str, list[tuple[str, Any, Any]]] = {}  # group -> (path, quantized, float)
        self.program: executorch_pt2e.StaticProgram | None = None  # a static scheme's PT2E graph
        if setup.quant in executorch_pt2e.SCHEMES:
            self.program = executorch_pt2e.StaticProgram(self.model, setup.max_seq, self.config.num_self_decoder_layers)
            # its graph's last slot holds the decode's current token, never a prompt's
            self.limits = dataclasses.replace(self.limits, contracts=Contracts(reserves_decode_slot=True))
        elif setup.quant is not None:
            float_model = copy.deepcopy(self.model)
            self.model = quantized_by_its_recipe(self.model, setup.quant)
            self.switches = quantization_switches(self.model, float_model)
        self.pad_token_id = model.config.get_text_config().pad_token_id
        self.position = 0

    def calibrate(self, prompts: list[Prompt]) -> None:
        if self.program is None:
            raise ValueError(f"{self.name} was built in {self.setup.quant or 'float'}: nothing to calibrate")
        self.program.calibrate(lambda: [self.prefill(prompt) for prompt in prompts])
        self._reset()  # no conversation left: the next call must be a prefill

    def observed_ranges(self) -> dict[str, tuple[float, float]]:
        if self.program is None or not self.program.calibrated:
            raise NotExposed(f"{self.name} has no calibrated ranges (built in {self.setup.quant or 'float'})")
        return self.program.ranges

    def quantization_groups(self) -> tuple[str, ...]:
        if self.program is not None:
            raise NotExposed(f"{self.name} in {self.setup.quant} is one PT2E graph: no per-group switch")
        if not self.switches:
            raise NotExposed(f"{self.name} runs in float (no integer scheme)")
        return tuple(self.switches)

    def quantize_groups(self, groups: set[str]) -> None:
        unknown = sorted(set(groups) - set(self.quantization_groups()))
        if unknown:
            raise ValueError(f"groups has unknown names {unknown}; expected some of {list(self.switches)}")
        for group, modules in self.switches.items():
            for path, quantized, float_module in modules:
                self.model.set_submodule(path, quantized if group in groups else float_module)

    def explain(self, row: Any) -> str | None:
        """A placeholder row on a multimodal model (:func:`.config.text_decoder_placeholders`);
        a RoPE row while it holds its RoPE frequencies in a low-precision dtype (it casts the whole
        model, as its export's default does) where its table is those rounded frequencies'
        (:func:`.config.rounded_rope_reason`); its cached keys, while it holds them so."""
        placeholders = text_decoder_placeholders(self.name, row, self.model_config)
        frequencies = {kind: self._attention(kind).inv_freq for kind in ("full_attention", "sliding_attention")}
        if placeholders or row.stage in ("RoPE", "RoPE decode"):
            return placeholders or rounded_rope_reason(self.name, row, self.rope, frequencies)
        cast = frequencies["full_attention"].dtype
        if row.stage != "KV cache" or not row.check.startswith("K ") or cast == torch.float32:
            return None
        return (
            f"{self.name} casts its whole model to {cast}, RoPE inv_freq included: keys rotated by rounded frequencies"
        )

    @property
    def _layers(self) -> list[Any]:
        decoder = self.model.model
        return [*decoder.self_decoder.layers, *decoder.cross_decoder.layers]

    def _attention(self, layer_type: str) -> Any:
        return next(
            layer.self_attn
            for layer in self._layers
            if (layer.self_attn.sliding_window is not None) == (layer_type == "sliding_attention")
        )

    def prefill_masks(
        self, attention_mask: torch.Tensor, mm_token_type_ids: torch.Tensor | None = None
    ) -> dict[str, torch.Tensor]:
        if attention_mask.shape[0] != 1 or not bool(attention_mask.bool().all()):
            raise NotExposed(f"{self.name} takes one unpadded row")
        if mm_token_type_ids is not None and bool(mm_token_type_ids.any()):
            raise NotExposed(f"{self.name} has no image blocks (text only)")
        length = attention_mask.shape[1]
        return {
            layer_type: (self._attention(layer_type)._build_attn_mask(None, length, length) == 0)[None, None]
            for layer_type in ("full_attention", "sliding_attention")
        }

    def rope(self, position_ids: torch.Tensor, dtype: torch.dtype) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        tables = {}
        for layer_type in ("full_attention", "sliding_attention"):
            attention = self._attention(layer_type)
            pairs = [attention._get_rope_freqs(row, row.numel()) for row in position_ids]
            tables[layer_type] = tuple(torch.stack(part).to(dtype) for part in zip(*pairs, strict=True))
        return tables

    def decode_masks(self, attention_mask: torch.Tensor) -> dict[str, torch.Tensor]:
        """Its decode step's masks (``_build_attn_mask`` at the position, over its ``max_seq`` cache
        slots, slot ``p`` holding position ``p``)."""
        if attention_mask.shape[0] != 1 or not bool(attention_mask.bool().all()):
            raise NotExposed(f"{self.name} decodes one unpadded row")
        position = torch.tensor([attention_mask.shape[1] - 1])
        return {
            layer_type: (self._attention(layer_type)._build_attn_mask(position, 1, self.setup.max_seq) == 0)
            for layer_type in ("full_attention", "sliding_attention")
        }

    def decode_rope(self, position: int, dtype: torch.dtype) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        return self.rope(torch.tensor([[position]]), dtype)

    def mask_fill_value(self) -> float:
        """Its masks' forbidden entries: ``-inf`` (it takes no padding, so no query row is ever all masked)."""
        return float(self._attention("full_attention").causal_mask.min())

    def cache_kv(self, row: int, positions: list[int]) -> dict[int, tuple[torch.Tensor, torch.Tensor]]:
        """Its in-program caches (``Gemma4KVCache``, slot ``p`` holding position ``p``) of the producing layers."""
        index = torch.tensor(positions)
        return {
            layer: (cache.k_cache[row][:, index], cache.v_cache[row][:, index])
            for layer, cache in enumerate(attention.self_attn.kv_cache for attention in self._layers)
            if cache is not None
        }

    def token_embedding(self, input_ids: torch.Tensor) -> torch.Tensor:
        decoder = self.model.model.self_decoder
        return decoder.embed_tokens(input_ids) * decoder.embed_scale

    def _reset(self) -> None:
        for layer in self._layers:
            cache = layer.self_attn.kv_cache
            if cache is not None:
                for buffer in cache.buffers():
                    buffer.zero_()
        self.position = 0

    def prefill_schedule(self, length: int) -> list[int]:
        """Its runners' policy: ``run_gemma4.py`` prefills the prompt in one call, which its export
        allows up to ``max_seq_len - 1`` tokens (``Dim("seq_len", max=max_seq_len - 1)``); ExecuTorch's
        ``TextPrefiller`` feeds a longer prompt in chunks of that length."""
        return expand_schedule((self.limits.chunks.max_length,), length)

    @torch.no_grad()
    def prefill(self, prompt: Prompt, *, keep_intermediates: bool = False) -> PortPrefill:
        """The prompt in the setup's schedule (else its runner's policy), each chunk one call at its
        positions (its cache carries the earlier chunks); the logits of each chunk's last token (its
        model runs the LM head on a call's last token only: no logits of every position); the layers'
        outputs and per-layer inputs of a single call."""
        ids = self._one_text_row(prompt)
        self._reset()
        length = ids.shape[1]
        chunks = self.setup.chunks(length) or self.prefill_schedule(length)
        decoder = self.model.model.self_decoder
        outputs = []
        with captured_layers(self._layers) as states, captured_output(decoder, "_compute_per_layer_inputs") as ple:
            for start, chunk in zip(chunk_starts(chunks), chunks, strict=True):
                outputs.append(self._forward(ids[:, start : start + chunk], torch.arange(start, start + chunk)))
        self.position = length
        last = outputs[-1][:, -1]
        if not keep_intermediates:
            return PortPrefill(last)
        chunk_logits = tuple(logits[:, -1] for logits in outputs)
        if len(chunks) > 1 or self.program is not None:  # layers' outputs: of one eager call only
            return PortPrefill(last, chunk_logits=chunk_logits)
        return PortPrefill(
            last, hidden_states=tuple(states), per_layer_inputs=ple[0].permute(1, 2, 0, 3), chunk_logits=chunk_logits
        )

    @property
    def _forward(self) -> Any:
        """What runs a call: its model, or in a static scheme its PT2E graph (observing until calibrated)."""
        return self.model if self.program is None else self.program

    @torch.no_grad()
    def decode(self, next_ids: torch.Tensor) -> torch.Tensor:
        if self.position == 0:
            raise ValueError(f"{self.name}: decode needs a prefill first")
        logits = self._forward(next_ids, torch.tensor([self.position]))[:, -1]
        self.position += 1
        return logits
