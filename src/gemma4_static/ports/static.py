"""This project's static runtime as a port (the default one): every stage exposed, and the runtime
itself (``port.runtime``) for the checks only it can answer (its mask value, its overflow report,
its exported stages, its cache layout)."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from .. import __version__
from ..cpu.masks import build_decode_bool_masks, build_prefill_bool_masks
from ..cpu.rope import build_rope
from ..export import StageCase, stage_cases
from ..quant import QuantProfile
from ..runtime import StaticGemma4Runtime
from .capabilities.runtime_internals import RUNTIME_INTERNALS
from .core import NotExposed, PortPrefill, PortSetup
from .limits import BatchLimits, ChunkLimits, ImageLimits, PortLimits
from .port import Gemma4Port
from .prompt import Prompt


def prefill_masks_of(config: Any) -> Any:
    """This project's prefill mask builder for ``config``: ``(valid, mm_token_type_ids) -> {layer_type: bool mask}``."""
    return lambda valid, types=None: build_prefill_bool_masks(config, valid, mm_token_type_ids=types)


def decode_masks_of(config: Any, slots: int | None = None, *, unwritten: int = 0) -> Any:
    """This project's decode mask builder for ``config`` over a static cache of ``slots`` slots (or the
    conversation's length plus ``unwritten``): ``(valid (B, P + 1)) -> {layer_type: (B, K) bool}``."""

    def masks(attention_mask: torch.Tensor) -> dict[str, torch.Tensor]:
        batch, total = attention_mask.shape
        valid = torch.zeros(batch, slots or total + unwritten, dtype=torch.bool)
        valid[:, :total] = attention_mask.bool()
        return {name: mask[:, 0, 0] for name, mask in build_decode_bool_masks(config, valid, total - 1).items()}

    return masks


def rope_of(config: Any) -> Any:
    """This project's RoPE tables for ``config``: ``(position_ids, dtype) -> {layer_type: (cos, sin)}``."""
    return lambda position_ids, dtype: build_rope(config, position_ids, dtype=dtype)


class StaticRuntimePort(Gemma4Port):
    """:class:`~gemma4_static.runtime.StaticGemma4Runtime` behind the port interface."""

    name = "gemma4-static"
    limits = PortLimits(
        batch=BatchLimits(padding_side="right"),
        dtypes=(torch.float32, torch.bfloat16, torch.float16),
        images=ImageLimits(accepted=True),
        chunks=ChunkLimits(chunked=True),  # any schedule: chunks of different lengths in one prefill
    )
    declares = (RUNTIME_INTERNALS.name,)

    def __init__(
        self,
        model: Any,
        setup: PortSetup,
        *,
        backend: str = "torch",
        mask_value: float | None = None,
        quant: str | None = None,
        sliding_cache: str = "ring",
    ) -> None:
        self.version = __version__
        self.setup, self.model = setup, model
        self.options = {"backend": backend, "mask_value": mask_value, "quant": quant, "sliding_cache": sliding_cache}
        self.runtime = StaticGemma4Runtime(
            model, max_seq=setup.max_seq, batch_size=setup.batch_size, image_slots=setup.image_slots, **self.options
        )
        self.config = model.config
        self.images: tuple = (None, None)  # the last prefill's pixel values and positions (for its export cases)
        program = self.runtime.program
        if program is not None:  # the one-program form: a call of its prefill method takes up to its length
            chunks = dataclasses.replace(self.limits.chunks, max_length=program.chunk)
            self.limits = dataclasses.replace(self.limits, chunks=chunks)

    def prefill_schedule(self, length: int) -> list[int]:
        """The layout's own: chunks of its ``prefill_chunk`` (the one-program form: of its prefill
        method's length), else one call."""
        program = self.runtime.program
        chunks = self.runtime.layout.prefill_chunks((program.chunk,) if program else None, length)
        return [length] if chunks is None else chunks

    @classmethod
    def around(cls, runtime: StaticGemma4Runtime, config: Any) -> StaticRuntimePort:
        """A port around an existing runtime (built for a model whose HF config is ``config``)."""
        port = cls.__new__(cls)
        port.version, port.runtime, port.config = __version__, runtime, config
        port.setup = PortSetup(runtime.layout.max_seq, runtime.layout.batch_size, runtime.layout.image_slots)
        return port

    def prefill_masks(
        self, attention_mask: torch.Tensor, mm_token_type_ids: torch.Tensor | None = None
    ) -> dict[str, torch.Tensor]:
        return prefill_masks_of(self.config)(attention_mask, mm_token_type_ids)

    def rope(self, position_ids: torch.Tensor, dtype: torch.dtype) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        return rope_of(self.config)(position_ids, dtype)

    def token_embedding(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.runtime.stages.embedding(input_ids)

    def _prefill_outputs(self, prompt: Prompt, keep_intermediates: bool) -> Any:
        self.images = (prompt.pixel_values, prompt.image_position_ids)
        inputs = self.runtime.build_inputs(prompt.input_ids, prompt.attention_mask)
        return self.runtime.prefill_outputs(
            inputs,
            prompt.pixel_values,
            prompt.image_position_ids,
            keep_intermediates=keep_intermediates,
            schedule=self.setup.prefill_schedule,
        )

    def prefill(self, prompt: Prompt, *, keep_intermediates: bool = False) -> PortPrefill:
        runtime = self.runtime
        outputs = self._prefill_outputs(prompt, keep_intermediates)
        if not keep_intermediates:
            return PortPrefill(outputs.logits)
        length = prompt.input_ids.shape[1]  # its outputs, valid positions first, laid out as the prompt is
        states = None
        if outputs.hidden_states is not None:
            states = tuple(prompt.laid_out(state[:, :length]) for state in outputs.hidden_states)
        all_logits = None if states is None else _over_positions(runtime.stages.lm_head, states[-1])
        return PortPrefill(
            outputs.logits,
            hidden_states=states,
            per_layer_inputs=prompt.laid_out(outputs.per_layer_inputs[:, :length]),
            soft_tokens=outputs.soft_tokens,
            all_logits=all_logits,
            chunk_logits=outputs.chunk_logits,
            extra={"outputs": outputs},
        )

    def decode(self, next_ids: torch.Tensor) -> torch.Tensor:
        return self.runtime.decode_one(next_ids)

    def generate(self, prompt: Prompt, *, max_new_tokens: int, eos_token_id: int | None = None) -> torch.Tensor:
        return self.runtime.generate(
            prompt.input_ids,
            prompt.attention_mask,
            max_new_tokens=max_new_tokens,
            eos_token_id=eos_token_id,
            pixel_values=prompt.pixel_values,
            image_position_ids=prompt.image_position_ids,
        )

    def calibrate(self, prompts: list[Prompt]) -> None:
        """Its integer profile's ranges from its own prefills of ``prompts`` (:meth:`StaticGemma4Runtime.calibrate`;
        on text alone its vision stage stays float); prompts of fewer rows than its static batch (the
        suite's unpadded rows) through a batch-1 runtime of the same model, whose ranges it adopts."""
        if any(prompt.input_ids.shape[0] != self.setup.batch_size for prompt in prompts):
            single = StaticRuntimePort(self.model, dataclasses.replace(self.setup, batch_size=1), **self.options)
            single.calibrate(prompts)
            self.runtime.quantization.adopt(single.runtime.quantization)
            return
        images = any(prompt.pixel_values is not None for prompt in prompts)
        unreached = "error" if images or not isinstance(self.runtime.quantization, QuantProfile) else "float"
        # its stages as a deployment runs them (the LM head on each row's last token only), every
        # stage in PyTorch (a one-program form records its stages' inputs there)
        run = lambda: [self._prefill_outputs(prompt, keep_intermediates=True) for prompt in prompts]  # noqa: E731
        self.runtime.calibrate(run, unreached=unreached)
        self.runtime.reset()  # no conversation left: the next call must be a prefill

    def decode_masks(self, attention_mask: torch.Tensor) -> dict[str, torch.Tensor]:
        """Its decode masks over its ``max_seq`` slots (slot ``p`` holds position ``p`` in the mask
        table; the ring layout maps slots through the same positions), the new token at ``P``."""
        return decode_masks_of(self.config, self.runtime.layout.max_seq)(attention_mask)

    def decode_rope(self, position: int, dtype: torch.dtype) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        return self.runtime.stack.rope.lookup(torch.tensor([[position]]), dtype)

    def mask_fill_value(self) -> float:
        return self.runtime.stack.fill

    def cache_kv(self, row: int, positions: list[int]) -> dict[int, tuple[torch.Tensor, torch.Tensor]]:
        """Its producing layers' buffers at the slots of ``positions`` (a ring slot ``p mod R``)."""
        if self.runtime.program is not None:
            raise NotExposed("the KV cache lives inside the program (backend 'executorch'): checked through the logits")
        cache, index = self.runtime.cache, torch.tensor(positions)
        return {
            layer: tuple(
                buffer[layer][row][:, cache.slots(cache.layer_types[layer], index)]
                for buffer in (cache.keys, cache.values)
            )
            for layer in cache.keys
        }

    def static_inputs(self, prompt: Prompt) -> tuple[torch.Tensor, torch.Tensor]:
        inputs = self.runtime.build_inputs(prompt.input_ids, prompt.attention_mask)
        return inputs.input_ids, inputs.valid

    def export_cases(self) -> list[StageCase]:
        """One representative stage per kind (each layer type and K/V role in prefill, chunk and
        decode mode), on its static shapes, with the last prefill's images for the vision stage."""
        pixel_values, image_position_ids = self.images
        return stage_cases(
            self.runtime, pixel_values=pixel_values, image_position_ids=image_position_ids, representative=True
        )


def _over_positions(head: Any, hidden: torch.Tensor, chunk: int = 64) -> torch.Tensor:
    """``head`` ``(B, S, H) -> (B, S, vocab)`` applied ``chunk`` positions at a time into one output:
    at a real vocabulary the logits of a whole prompt are the largest tensor of a run (1.1 GB for two
    rows of 515 tokens in float32), and the head's softcap temporaries stay a chunk's."""
    first = head(hidden[:, :chunk])
    logits = first.new_empty((*hidden.shape[:2], first.shape[-1]))
    logits[:, :chunk] = first
    for start in range(chunk, hidden.shape[1], chunk):
        logits[:, start : start + chunk] = head(hidden[:, start : start + chunk])
    return logits
