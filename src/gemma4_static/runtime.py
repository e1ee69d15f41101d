"""``StaticGemma4Runtime``: the glue that sequences the CPU side and the NPU stages.

Data flows one way: :mod:`~gemma4_static.spec` reads the model once (sizes, ids, weights);
:mod:`~gemma4_static.cpu` lays out inputs and owns the mask table, the RoPE tables and the KV
cache; :mod:`~gemma4_static.npu` stages compute. This module only decides which stage runs on
which slots.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .backends import Backend, backend_named
from .cpu.cache import StaticKVCache
from .cpu.checks import mask_fill_value
from .cpu.greedy import greedy
from .cpu.inputs import StaticInputs, build_static_inputs, check_eos_token_ids, check_next_ids, llm_ids
from .cpu.layout import StaticLayout, image_slots_argument, vision_profiles_argument
from .cpu.schedule import expand_schedule
from .multimodal import fuse_images
from .npu.stages import build_stages
from .quant.sites import observed_positions
from .spec import read_model
from .stack import LayerStack


@dataclass(frozen=True)
class PrefillOutputs:
    """A prefill's ``logits (B, vocab)`` at each row's last valid token and, with ``keep_intermediates``,
    its stage outputs (``hidden_states``: the embeddings and each layer's output, ``(B, max_seq, H)``;
    ``soft_tokens``: one ``(tokens, H)`` per image, in the caller's order; ``chunk_logits``: for a
    chunked prefill, per chunk each row's logits at its last token so far)."""

    logits: torch.Tensor
    inputs: StaticInputs
    embeddings: torch.Tensor | None = None
    per_layer_inputs: torch.Tensor | None = None
    soft_tokens: tuple[torch.Tensor, ...] | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    chunk_logits: tuple[torch.Tensor, ...] | None = None  # per chunk, (B, vocab) at each row's last token so far


class StaticGemma4Runtime:
    """Static-shape prefill, decode and greedy generation of an HF Gemma 4 model
    (``Gemma4ForConditionalGeneration`` or ``Gemma4ForCausalLM``) with batch ``batch_size``, every
    row's tokens first and padded to ``max_seq`` (rows given left- or right-padded).

    The stages run over a :class:`~gemma4_static.stack.LayerStack` (masks, RoPE, the static cache;
    ``sliding_cache="ring"`` keeps ``sliding_window`` slots for sliding layers, ``"full"`` ``max_seq``).
    ``modules`` are the PyTorch stages (what export reads); ``stages`` are what runs: the modules
    (``backend="torch"``; ``"torch-packed"``: their projections and LM head over weights oneDNN
    reordered once, :mod:`~gemma4_static.npu.packed`, a faster decode on x86 CPUs for a copy of
    those weights) or their ExecuTorch programs (``"executorch-stages"``: a program per stage,
    the cache passed in and out). ``backend="executorch"`` runs the text model as one program with
    the KV cache inside it (``program``, :class:`~gemma4_static.executorch.cache_program.CacheProgram`; images
    still go through the vision and fusion programs). ``prefill_chunk``: prefill in fixed chunks.
    ``image_slots`` ``[(start, tokens), ...]`` are where a row's images go (any slot may hold text
    instead; ``visual_start_idx``/``num_visual_tokens`` is the one-slot shorthand); each slot's
    vision stage runs at ``vision_profile`` soft tokens (one for all slots or one per slot;
    default: the smallest profile that holds the slot). Forbidden
    keys get the additive ``mask_value`` (default per dtype: :func:`~gemma4_static.cpu.checks.default_mask_value`).
    ``quant`` runs an integer profile (:mod:`~gemma4_static.quant`: fake-quantized PyTorch stages,
    or quantized XNNPACK programs on either ExecuTorch backend), after :meth:`calibrate`. After a
    prefill, :meth:`decode_one` advances every row by one token at its own position.
    """

    def __init__(
        self,
        model: Any,
        *,
        max_seq: int,
        batch_size: int = 1,
        image_slots: list[tuple[int, int]] | None = None,
        visual_start_idx: int | None = None,
        num_visual_tokens: int | None = None,
        prefill_chunk: int | None = None,
        vision_profile: int | list[int] | None = None,
        sliding_cache: str = "ring",
        backend: str | Backend = "torch",
        mask_value: float | None = None,
        quant: str | None = None,
    ) -> None:
        self.spec, weights = read_model(model)
        self.mask_value = mask_fill_value(mask_value, self.spec.dtype)
        slots = image_slots_argument(image_slots, visual_start_idx, num_visual_tokens, max_seq=max_seq)
        profiles = vision_profiles_argument(vision_profile, slots)
        self.layout = StaticLayout(max_seq, batch_size, slots, prefill_chunk, profiles, sliding_cache)
        if self.layout.has_image_slot and weights.vision is None:
            raise ValueError("image slots need a model with a vision tower")
        self.modules = build_stages(self.spec, weights, image_slots=self.layout.image_slots)
        self.backend = backend_named(backend)
        self.quantization = self.backend.quantization(self.modules, quant)
        self.stages = self.backend.stages(self.modules, self.quantization)
        self.stack = LayerStack(self.spec, self.stages.layers, self.layout, self.mask_value)
        self.program = self.backend.program(self.modules, self.stack, self.quantization)
        self.prefilled = False

    def calibrate(self, run: Callable[[], Any], *, unreached: str = "error") -> None:
        """Fix the integer profile's activation ranges (``quant``) from what ``run()`` runs through this
        runtime, in float (e.g. prefills of sample prompts); the runtime runs quantized after. A site
        ``run()`` never reached is an error, or with ``unreached="float"`` stays float (the vision
        stage of a calibration on text)."""
        if self.quantization is None:
            raise ValueError("calibrate needs a runtime built with quant=SCHEME (e.g. 'a16w8'), got quant=None")
        self.quantization.calibrate(run, unreached=unreached)

    def reset(self) -> None:
        """Forget the conversation: the cache is emptied and the next call must be a prefill."""
        self.cache.reset()
        self.prefilled = False

    @property
    def cache(self) -> StaticKVCache:
        """The static KV cache (buffers per producing layer and each row's length)."""
        return self.stack.cache

    def build_inputs(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> StaticInputs:
        """Validate and lay out processor outputs at ``(batch_size, max_seq)``."""
        return build_static_inputs(
            input_ids,
            attention_mask,
            self.layout,
            pad_token_id=self.spec.pad_token_id,
            vocab_size=self.spec.vocab_size,
            image_token_id=self.spec.image_token_id,
            placeholder_token_ids=self.spec.placeholder_token_ids,
        )

    @torch.no_grad()
    def prefill(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        pixel_values: torch.Tensor | None = None,
        image_position_ids: torch.Tensor | None = None,
        *,
        schedule: Sequence[int] | None = None,
    ) -> torch.Tensor:
        """Logits ``(B, vocab)`` at each row's last valid token; fills the static cache. ``schedule``:
        the chunk lengths to prefill in, in order (any lengths; the last repeats until the longest row
        is covered: :mod:`~gemma4_static.cpu.schedule`); by default the layout's ``prefill_chunk``,
        else one shot."""
        inputs = self.build_inputs(input_ids, attention_mask)
        return self.prefill_outputs(inputs, pixel_values, image_position_ids, schedule=schedule).logits

    @torch.no_grad()
    def prefill_outputs(
        self,
        inputs: StaticInputs,
        pixel_values: torch.Tensor | None = None,
        image_position_ids: torch.Tensor | None = None,
        *,
        keep_intermediates: bool = False,
        schedule: Sequence[int] | None = None,
    ) -> PrefillOutputs:
        """:meth:`prefill` of :meth:`build_inputs`' result, with its intermediate products (see
        :class:`PrefillOutputs`; the per-layer hidden states are kept by a single-shot prefill on the
        stages, and by a single-call prefill of the one-program form; the chunk-end logits by a chunked one)."""
        stages, program = self.stages, self.program
        chunks = self.layout.prefill_chunks(schedule, int(inputs.valid_length.max()))
        if program is not None and chunks is None:
            chunks = expand_schedule((program.chunk,), int(inputs.valid_length.max()))
        ends = [] if keep_intermediates and chunks is not None else None
        needs_embeddings = program is None or keep_intermediates or inputs.image_count > 0
        embeddings = stages.embedding(inputs.input_ids) if needs_embeddings else None
        fused, soft_tokens = fuse_images(
            stages, self.spec, self.layout, inputs, embeddings, pixel_values, image_position_ids, self.mask_value
        )
        blocks = None if soft_tokens is None else self.stack.mask_table.vision_blocks(inputs.mm_token_type_ids)
        self.prefilled = False  # until this prefill has filled the cache
        by_stages = program is None or keep_intermediates
        with observed_positions(inputs.valid):  # a calibration observes the text's prompt tokens, never its padding
            per_layer_inputs = stages.per_layer_inputs(inputs.input_ids, fused) if by_stages else None
            if program is not None:  # the cache-in-program form: a single call's layer outputs from its traced twin
                states = [] if keep_intermediates and len(chunks) == 1 else None
                self.cache.reset(inputs.valid_length)
                logits = program.prefill(inputs, None if soft_tokens is None else fused, blocks, chunks, states, ends)
            else:
                states = [fused] if keep_intermediates and chunks is None else None
                last = self.stack.prefill(fused, per_layer_inputs, inputs, blocks, states, chunks, ends)
                logits = stages.lm_head(last)[:, 0]
                ends = None if ends is None else [stages.lm_head(end)[:, 0] for end in ends]
        self.prefilled = True
        if not keep_intermediates:
            return PrefillOutputs(logits=logits, inputs=inputs)
        return PrefillOutputs(
            logits=logits,
            inputs=inputs,
            embeddings=embeddings,
            per_layer_inputs=per_layer_inputs,
            soft_tokens=soft_tokens,
            hidden_states=None if states is None else tuple(states),
            chunk_logits=None if ends is None else tuple(ends),
        )

    @torch.no_grad()
    def decode_one(self, next_ids: torch.Tensor) -> torch.Tensor:
        """Feed one token per row ``(B, 1)`` at each row's next position; returns logits ``(B, vocab)``.

        Raises ``ValueError`` before any prefill (or after :meth:`reset`), and ("cache is full") when
        a row already holds ``max_seq`` tokens.
        """
        next_ids = check_next_ids(next_ids, batch_size=self.layout.batch_size, vocab_size=self.spec.vocab_size)
        if not self.prefilled:
            raise ValueError("decode_one needs a prefill first: the cache holds no prompt (call prefill or generate)")
        next_ids = llm_ids(next_ids, self.spec.placeholder_token_ids, self.spec.pad_token_id)
        positions = self.cache.advance()[:, None]
        if self.program is not None:
            return self.program.decode(next_ids, positions)
        embeddings = self.stages.embedding(next_ids)
        per_layer_inputs = self.stages.per_layer_inputs(next_ids, embeddings)
        masks = self.stack.cache_masks(positions, self.cache.lengths)
        keep = torch.ones_like(positions, dtype=torch.bool)
        layers = range(self.spec.num_layers)
        hidden = self.stack.run(embeddings, per_layer_inputs, positions, keep, masks, layers, mode="cache")
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
        eos = check_eos_token_ids(eos_token_id, vocab_size=self.spec.vocab_size)
        logits = self.prefill_outputs(inputs, pixel_values, image_position_ids).logits
        return greedy(
            logits, self.decode_one, max_new_tokens=max_new_tokens, eos=eos, pad_token_id=self.spec.pad_token_id
        )
