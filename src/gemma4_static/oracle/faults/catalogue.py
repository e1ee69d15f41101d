"""The fault catalogue: realistic Gemma 4 porting bugs, each a named :class:`~.faults.Fault` with
what goes wrong and the patches that inject it.

The bugs are ones ports of Gemma 4 (and Gemma 2/3, which share these parts) shipped or reported,
e.g. a SWA window shifted by one position (quic/efficient-transformers#1250), proportional RoPE
with the rotary span as the frequency denominator (pegainfer#820, NVIDIA-NeMo/Megatron-Bridge#4196),
a softcap that does nothing once logits pass 2x the cap (unslothai/unsloth-zoo#593; E2B logits
reach ~124), no final softcap at all (ml-explore/mlx-examples#857). Add one for every bug found
later; ``gemma4-static verify --self-test`` must catch each.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ... import runtime as runtime_module
from ...cpu import cache, inputs, masks, prefill_masks, rope, rules
from ...npu import decoder, embedding, lm_head
from ...spec import TextConfigView
from ...stack import LayerStack
from . import fault_patches as patches
from .catalogue_family import FAMILY_FAULTS
from .catalogue_quant import QUANT_FAULTS
from .catalogue_vision import VISION_FAULTS
from .faults import Fault, after_init, setting

CATALOGUE: tuple[Fault, ...] = (
    Fault(
        "sliding-window-off-by-one",
        "sliding layers see window + 1 keys (k >= q - window instead of k > q - window)",
        ((rules, "within_window", patches.window_plus_one), (masks, "within_window", patches.window_plus_one)),
    ),
    Fault(
        "sliding-window-ignored",
        "sliding layers attend like full layers (no window at all)",
        ((rules, "causal_within_window", lambda original: lambda q, k, window: rules.causal(q, k)),),
    ),
    Fault(
        "padding-keys-visible",
        "the attention mask ignores key padding (causal pattern only)",
        (
            (masks.MaskTable, "bool_masks", patches.ignoring_padding),
            (masks.MaskTable, "additive_masks", patches.ignoring_padding),
            (prefill_masks.PrefillMaskBuffers, "write", patches.ignoring_padding),
        ),
    ),
    Fault(
        "kept-masks-not-reopened",
        "the kept prefill masks never reopen a key column an earlier, shorter prompt padded",
        ((prefill_masks.PrefillMaskBuffers, "_rewrite", patches.never_restoring),),
    ),
    Fault(
        "image-tokens-causal",
        "soft tokens of one image do not attend to each other bidirectionally",
        ((masks.MaskTable, "vision_blocks", lambda original: lambda table, token_types: None),),
        needs_vision=True,
    ),
    Fault(
        "sliding-rope-theta-of-full",
        "one rope_theta (1e6, the full layers') for every layer type",
        ((rope, "inverse_frequencies", patches.wrong_theta_for_sliding),),
    ),
    Fault(
        "proportional-rope-as-default",
        "full layers rotate every pair (partial_rotary_factor ignored)",
        ((rope, "inverse_frequencies", patches.proportional_as_default),),
    ),
    Fault(
        "partial-rope-neox-exponents",
        "proportional RoPE with exponents over the rotated dims (2i / rotary_dim), not the head dim",
        ((rope, "inverse_frequencies", patches.neox_partial_rope),),
    ),
    Fault(
        "rope-positions-from-one",
        "RoPE positions counted from 1",
        ((rope.RopeTables, "lookup", patches.positions_from_one),),
    ),
    Fault(
        "rope-angles-in-low-precision",
        "RoPE angles computed in the stage dtype (bf16/fp16) instead of fp32, then cos/sin",
        ((rope.RopeTable, "lookup", patches.rope_angles_in_dtype),),
    ),
    Fault(
        "chunk-written-before-attending",
        "chunked prefill writes each chunk into the sliding ring before attending over it",
        (
            (LayerStack, "run", patches.chunk_as_decode),
            (LayerStack, "cache_masks", patches.masks_over_the_cache),
        ),
    ),
    Fault(
        "ring-slot-off-by-one",
        "a sliding layer's ring cache writes position p to slot (p + 1) mod W",
        ((cache.StaticKVCache, "slots", patches.ring_slot_plus_one),),
    ),
    Fault(
        "shared-kv-first-producer",
        "KV-shared layers read the first layer of their type instead of the last non-shared one",
        ((TextConfigView, "kv_sources", patches.first_producer),),
    ),
    Fault(
        "shared-kv-reads-the-ring",
        "a single-shot prefill's KV-sharing layers read the producer's ring cache, not its K/V of the prefill",
        ((LayerStack, "run", patches.reusing_layers_over_the_cache),),
    ),
    Fault(
        "final-softcap-missing",
        "logits are not soft-capped (tanh(x / 30) * 30)",
        (after_init(lm_head.LMHead, setting("softcap", lambda head: None)),),
    ),
    Fault(
        "layer-scalar-missing",
        "the per-layer output scalar is not applied",
        (after_init(decoder.DecoderLayer, setting("layer_scalar", lambda layer: torch.ones_like(layer.layer_scalar))),),
    ),
    Fault(
        "attention-scaled-by-head-dim",
        "attention scores scaled by 1/sqrt(head_dim) (Gemma 4 uses 1.0: q and k are RMS-normed)",
        ((decoder, "F", patches.sdpa_scaled_by_head_dim),),
    ),
    Fault(
        "gelu-erf",
        "the exact (erf) GELU instead of gelu_pytorch_tanh",
        ((decoder, "gelu_tanh", lambda original: F.gelu),),
        float32_only="the two GELUs differ by at most 4.7e-4 (at x = -2.7), under half an fp16 ulp of 1; at the "
        "logits 70 dB below the signal, where an integer scheme's own noise sits near 25 dB",
    ),
    Fault(
        "embedding-unscaled",
        "embedding rows not multiplied by sqrt(hidden size)",
        (after_init(embedding.TokenEmbedding, lambda stage: stage.scale.fill_(1.0)),),
    ),
    Fault(
        "placeholders-reach-ple",
        "image/video/audio placeholder ids index the per-layer embedding table (not mapped to pad)",
        ((inputs, "llm_ids", patches.keep_placeholders), (runtime_module, "llm_ids", patches.keep_placeholders)),
        needs_vision=True,
    ),
    Fault(
        "v-norm-missing",
        "values are not RMS-normed (the scale-free v_norm is dropped)",
        ((decoder, "rms_norm", patches.norm_without_v_norm),),
    ),
    Fault(
        "q-norm-after-rope",
        "the q norm's learned weight applied after the rotation instead of before it",
        (
            (decoder.DecoderLayer, "attention_inputs", patches.q_norm_after_rope.forward),
            (decoder, "apply_rope", patches.q_norm_after_rope.rope),
        ),
    ),
    Fault(
        "k-norm-weight-dropped",
        "the k norm runs without its learned weight",
        (after_init(decoder.DecoderLayer, setting("k_norm", lambda layer: None)),),
    ),
    Fault(
        "mask-value-minus-one",
        "a finite mask value far too small (-1): masked keys keep real attention weight",
        (after_init(LayerStack, setting("fill", lambda stack: -1.0)),),
    ),
    Fault(
        "key-span-one-short",
        "decode attends over the max_seq slots up to the query's position, leaving out its own key",
        ((LayerStack, "key_span", lambda original: lambda stack, positions: int(positions.max())),),
    ),
    *VISION_FAULTS,
    *FAMILY_FAULTS,
    *QUANT_FAULTS,
)

FAULT_NAMES = tuple(fault.name for fault in CATALOGUE)


def faults_named(names: list[str] | None) -> tuple[Fault, ...]:
    """The catalogued faults called ``names`` (all of them for ``None``); ``ValueError`` for an unknown name."""
    if names is None:
        return CATALOGUE
    unknown = sorted(set(names) - set(FAULT_NAMES))
    if unknown:
        raise ValueError(f"unknown fault names {unknown}; expected some of {list(FAULT_NAMES)}")
    return tuple(fault for fault in CATALOGUE if fault.name in names)
