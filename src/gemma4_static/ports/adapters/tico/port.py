"""Samsung TICO's ``StaticGemma4Runtime`` (``tico.quantization.recipes.debug.static_gemma4_runtime``,
in the ``tico`` package) as a port, driven as its own ``run_static_gemma4_runtime`` drives it: its PTQ
wrappers in NO_QUANT mode (float) with its default ``pre_negated_sin`` RoPE convention, its
:class:`StaticGemma4Layout` and static vision profiles, ``build_static_inputs`` then ``reset_cache`` /
``prefill`` / ``decode_one`` / ``generate_greedy``.

What it takes, as its code says: ``Gemma4ForConditionalGeneration`` with a dense text decoder (it
raises on MoE blocks) and a vision tower whose patch size, pooling kernel and soft-token budget
match one of its profiles (``static_vision_profile.py``: 16-pixel patches, kernel 3, 280 soft
tokens); batch 1, right padding; exactly one image per prompt at the profile's slot, no BOS, its
``image_position_ids`` checked against the profile's canonical ones; no text-only path. Its static
length counts the decode's current slot (``max_seq - 1`` tokens held), and its ``generate_greedy``
decodes the last token it generates too.

Prompts reach ``build_static_inputs`` through a processor stand-in (:mod:`.inputs`: the suite's
tokenized prompt as HF's processor returns it), so TICO's own host code pads, maps placeholders and
validates its profile. Host-side stages are mapped to HF's conventions at the edge: its pre-negated
sine tables to rotate-half ones, its decode masks (past storage, then the current token in the last
slot) to absolute positions."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from importlib import metadata
from typing import Any

import torch

from ....export import StageCase
from ... import Gemma4Port, NotExposed, OwnCheck, PortPrefill, PortSetup, Prompt
from ...capabilities.host_stages import appended_to_absolute
from ...limits import BatchLimits, Contracts, ImageLimits, PortLimits, SchemeLimits
from . import quant as tico_quant
from .flow import own_flow
from .graphs import GraphRecorder
from .inputs import PromptProcessor, hf_sine, refusal, tico_profiles
from .scope import explanation


class TicoGemma4Port(Gemma4Port):
    """TICO's ``StaticGemma4Runtime`` in NO_QUANT mode, float32, its default static vision profile."""

    name = "tico-gemma4"
    limits = PortLimits(
        batch=BatchLimits(max_batch=1, padding_side="right"),
        # its attention wrappers' mask capacity (2048 unless its PTQ config names text.max_seq, which the
        # runtime never sets from its layout: past 2048 a prefill raises, docs/findings.md)
        max_seq=2048,
        images=ImageLimits(accepted=True, required=True, profiles=tico_profiles()),
        contracts=Contracts(reserves_decode_slot=True, generate_leaves="all"),
        # its PTQ wrappers in QUANT mode, calibrated on the suite's prompts
        schemes=SchemeLimits(tico_quant.SCHEMES, tico_quant.RECIPES),
    )

    def __init__(self, model: Any, setup: PortSetup) -> None:
        from tico.quantization.recipes.debug.static_gemma4_runtime import StaticGemma4Runtime
        from tico.quantization.wrapq.wrappers.gemma4 import static_vision_profile as profiles
        from tico.quantization.wrapq.wrappers.gemma4.utils import StaticGemma4Layout

        refused = refusal(model)
        if refused is not None:
            raise ValueError(refused)
        self.version = metadata.version("tico")
        self.setup, self.config = setup, model.config
        profile = profiles.get_gemma4_static_vision_profile(profiles.DEFAULT_GEMMA4_STATIC_VISION_PROFILE)
        if setup.batch_size != 1 or setup.image_slots not in ((), self.limits.images.profile.image_slots):
            raise ValueError(f"{self.name} takes batch 1 and one image at {profile.name}'s slot, got {setup}")
        self.pad_token_id = model.config.get_text_config().pad_token_id
        self.processor = PromptProcessor(profile, self.pad_token_id)
        layout = StaticGemma4Layout(
            max_seq=setup.max_seq,
            visual_start_idx=profile.visual_start_idx,
            num_visual_tokens=profile.num_visual_tokens,
        )
        with tico_quant.ptq_builder(setup.quant):
            self.runtime = StaticGemma4Runtime(model, self.processor, layout=layout, vision_profile=profile)
        self.graphs = GraphRecorder(self.runtime, model.config.get_text_config())
        self.printed: list[str] = []  # what TICO printed while the port drove it
        self.bidirectional = model.config.get_text_config().use_bidirectional_attention == "vision"

    def explain(self, row: Any) -> str | None:
        """What TICO's own code accounts for, only where it holds for this run (:mod:`.scope`)."""
        folded = type(self._patch_embedder()).__name__ == "QuantGemma4VisionPatchEmbedder"
        return explanation(self.name, row, bidirectional=self.bidirectional, folded=folded)

    # -- its PTQ (a static scheme: calibrated on the suite's prompts, then QUANT mode)
    def calibrate(self, prompts: list[Prompt]) -> None:
        if self.setup.quant is None:
            raise ValueError(f"{self.name} was built in float (setup.quant None): nothing to calibrate")
        if prompts:  # its vision module, built at a first prefill, refuses to be built in CALIB mode
            self.runtime._get_or_create_vision_prefill(self._batch(prompts[0])["image_position_ids"])
        tico_quant.calibrate(self.runtime.qmodel, lambda: [self.prefill(prompt) for prompt in prompts])
        self.runtime.reset_cache()  # no conversation left: the next call must be a prefill

    def observed_ranges(self) -> dict[str, tuple[float, float]]:
        return tico_quant.observed_ranges(self.runtime.qmodel)

    def quantization_groups(self) -> tuple[str, ...]:
        if self.setup.quant is None:
            raise NotExposed(f"{self.name} runs in float (no integer scheme)")
        return tuple(tico_quant.groups(self.runtime))

    def quantize_groups(self, groups: set[str]) -> None:
        known = tico_quant.groups(self.runtime)
        unknown = sorted(set(groups) - set(known))
        if unknown:
            raise ValueError(f"groups has unknown names {unknown}; expected some of {list(known)}")
        for name, modules in known.items():
            tico_quant.set_quantized(modules, name in groups)

    def _patch_embedder(self) -> Any:
        vision = self.runtime._wrapped_model.vision_tower
        return getattr(vision, "wrapped", vision).patch_embedder.wrapped

    def token_embedding(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Its token-embedding graph (``Gemma4TokenEmbeddingExportAdapter``)."""
        with torch.no_grad():
            return self.runtime.token_embedding(input_ids)

    @contextlib.contextmanager
    def _quiet(self) -> Iterator[None]:
        """TICO prints as it goes (each generated token); its lines are kept, off the report."""
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            yield
        self.printed += out.getvalue().splitlines()

    def _batch(self, prompt: Prompt) -> dict[str, Any]:
        """TICO's static batch for ``prompt``, built by its own ``build_static_inputs``."""
        if prompt.input_ids.shape[0] != 1 or not bool(prompt.attention_mask.bool().all()):
            raise NotExposed(f"{self.name} takes one unpadded row (it pads to its static length itself)")
        if prompt.pixel_values is None:
            raise NotExposed(f"{self.name} needs an image in every prompt (it has no text-only path)")
        return self.runtime.build_static_inputs(self.processor.key(prompt), None)

    @torch.no_grad()
    def prefill(self, prompt: Prompt, *, keep_intermediates: bool = False) -> PortPrefill:
        batch = self._batch(prompt)
        runtime = self.runtime
        runtime._get_or_create_vision_prefill(batch["image_position_ids"])  # built by its first prefill anyway
        runtime.reset_cache()
        with self.graphs.recording() as seen, self._quiet():
            logits = runtime.prefill(batch)
        if not keep_intermediates:
            return PortPrefill(logits)
        length = prompt.input_ids.shape[1]
        layers = [seen[f"prefill layer {index}"] for index in range(len(runtime.prefill_layers))]
        states = (seen["mm_fusion"], *(output[0] if isinstance(output, tuple) else output for output in layers))
        states = tuple(state[:, :length] for state in states)
        return PortPrefill(
            logits,
            hidden_states=states,
            per_layer_inputs=None if "ple_projection" not in seen else seen["ple_projection"][:, :length],
            soft_tokens=(seen["vision_prefill"].reshape(-1, states[0].shape[-1]),),
            all_logits=runtime._apply_final_logit_softcapping(runtime.lm_head(states[-1])),
        )

    @torch.no_grad()
    def decode(self, next_ids: torch.Tensor) -> torch.Tensor:
        with self.graphs.recording(), self._quiet():
            return self.runtime.decode_one(next_ids)

    @torch.no_grad()
    def generate(self, prompt: Prompt, *, max_new_tokens: int, eos_token_id: int | None = None) -> torch.Tensor:
        """``generate_greedy`` (its loop stops at EOS before decoding it; ``eos_token_id=None`` passes -1,
        its own way to stop at none): its new tokens, the pad id after an EOS."""
        batch = self._batch(prompt)
        self.runtime.reset_cache()
        with self._quiet():
            out = self.runtime.generate_greedy(
                batch, max_new_tokens, eos_token_id=-1 if eos_token_id is None else eos_token_id
            )
        new = out[:, prompt.input_ids.shape[1] :]
        return torch.cat((new, new.new_full((1, max_new_tokens - new.shape[1]), self.pad_token_id)), dim=1)

    # -- its host-side stages, in HF's conventions
    def prefill_masks(
        self, attention_mask: torch.Tensor, mm_token_type_ids: torch.Tensor | None = None
    ) -> dict[str, torch.Tensor]:
        """Its ``build_prefill_masks_and_rope`` masks (additive, 0 = allowed) as booleans; it takes no
        image-block layout (its masks are causal over image tokens, as E2B's)."""
        masks, _ = self.runtime.build_prefill_masks_and_rope(torch.zeros_like(attention_mask), attention_mask)
        return {name: mask == 0 for name, mask in masks.items()}

    def rope(self, position_ids: torch.Tensor, dtype: torch.dtype) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """Its prefill RoPE tables (positions ``0 .. S - 1`` of a static prefill) in HF's layout, cast to ``dtype``."""
        length = position_ids.shape[-1]
        if position_ids.shape[0] != 1 or not torch.equal(position_ids[0], torch.arange(length)):
            raise NotExposed(f"{self.name} builds RoPE for the positions 0 .. S - 1 of one static prefill")
        valid = torch.ones(1, length, dtype=torch.long)
        _, tables = self.runtime.build_prefill_masks_and_rope(torch.zeros_like(valid), valid)
        return {name: (cos.to(dtype), hf_sine(sin).to(dtype)) for name, (cos, sin) in tables.items()}

    def _decode_tables(self, past_length: int, dtype: torch.dtype) -> tuple[dict, dict]:
        """Its ``build_decode_masks_and_rope`` for a conversation of ``past_length`` tokens."""
        runtime, kept = self.runtime, self.runtime.past_len
        runtime.past_len = past_length
        try:
            return runtime.build_decode_masks_and_rope(1, dtype)
        finally:
            runtime.past_len = kept

    def decode_masks(self, attention_mask: torch.Tensor) -> dict[str, torch.Tensor]:
        """Its decode masks over ``max_seq`` slots (past storage ``[0, max_seq - 1)``, slot ``p`` holding
        position ``p``, then the current token in the last slot) over absolute positions."""
        if attention_mask.shape[0] != 1 or not bool(attention_mask.bool().all()):
            raise NotExposed(f"{self.name} decodes one unpadded row")
        past = attention_mask.shape[1] - 1
        masks, _ = self._decode_tables(past, torch.float32)
        return {name: appended_to_absolute(mask[:, 0] == 0, past) for name, mask in masks.items()}

    def decode_rope(self, position: int, dtype: torch.dtype) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        _, tables = self._decode_tables(position, dtype)
        return {name: (cos, hf_sine(sin)) for name, (cos, sin) in tables.items()}

    def mask_fill_value(self) -> float:
        return self.runtime.attention_mask_fill_value

    def cache_kv(self, row: int, positions: list[int]) -> dict[int, tuple[torch.Tensor, torch.Tensor]]:
        """Its per-layer caches (slot ``p`` = position ``p``) of the producing layers; the KV-shared
        layers' buffers are allocated but never written (their K/V come from the producers' outputs)."""
        caches = self.runtime.layer_caches
        if not caches:
            raise NotExposed(f"{self.name}'s caches are allocated by a prefill")
        index = torch.tensor(positions)
        text = self.config.get_text_config()
        producing = range(text.num_hidden_layers - text.num_kv_shared_layers)
        return {
            layer: (caches[layer].past_k[row][:, index], caches[layer].past_v[row][:, index]) for layer in producing
        }

    def static_inputs(self, prompt: Prompt) -> tuple[torch.Tensor, torch.Tensor]:
        batch = self._batch(prompt)
        return batch["llm_input_ids"], batch["attention_mask"]

    def export_cases(self) -> list[StageCase]:  # its graphs with the inputs of their latest calls
        return self.graphs.export_cases()

    def circle_cases(self) -> list[StageCase]:  # the same graphs: what TICO converts to Circle
        return self.graphs.export_cases()

    # -- its own verification flow
    def own_checks(self, prompt: Prompt) -> list[OwnCheck]:
        """TICO's ``verify_step_*`` functions on this runtime and ``prompt`` (:mod:`.flow`)."""
        room = self.limits.capacity(self.setup.max_seq) - prompt.input_ids.shape[1]
        return own_flow(self.runtime, self.processor.key(prompt), room)
