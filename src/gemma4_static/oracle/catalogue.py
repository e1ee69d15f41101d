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

import dataclasses
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import torch
import torch.nn.functional as F

from .. import runtime as runtime_module
from ..cpu import cache, inputs, masks, rope, rules
from ..npu import decoder, embedding, lm_head
from ..spec import TextConfigView
from ..stack import LayerStack
from .catalogue_vision import VISION_FAULTS
from .faults import Fault, after_init, setting, with_argument


def _wrong_theta_for_sliding(original: Callable) -> Callable:
    return lambda spec: original(dataclasses.replace(spec, theta=1_000_000.0) if spec.rope_type == "default" else spec)


def _proportional_as_default(original: Callable) -> Callable:
    return lambda spec: original(dataclasses.replace(spec, rope_type="default"))


def _neox_partial_rope(original: Callable) -> Callable:
    """Exponents over the rotated dims (``2i / rotary_dim``) instead of the full head dim."""

    def frequencies(spec: Any) -> torch.Tensor:
        if spec.rope_type != "proportional":
            return original(spec)
        rotary = int(spec.partial_rotary_factor * spec.head_dim)
        inv_freq = torch.zeros(spec.head_dim // 2)
        inv_freq[: rotary // 2] = 1.0 / spec.theta ** (torch.arange(0, rotary, 2, dtype=torch.float32) / rotary)
        return inv_freq / spec.factor

    return frequencies


def _first_producer(original: property) -> property:
    """A reusing layer reads the first non-shared layer of its type, not the last."""

    def sources(view: TextConfigView) -> tuple[int, ...]:
        first: dict[str, int] = {}
        for index, layer_type in enumerate(view.layer_types):
            first.setdefault(layer_type, index)
        return tuple(
            first[layer_type] if mode == "reuse" else index
            for index, (layer_type, mode) in enumerate(zip(view.layer_types, view.kv_sharing_modes, strict=True))
        )

    return property(sources)


def _ignoring_padding(original: Callable) -> Callable:
    return lambda table, valid, *args, **kwargs: original(table, torch.ones_like(valid), *args, **kwargs)


def _positions_from_one(original: Callable) -> Callable:
    """RoPE at ``p + 1`` (the last table row stands in past the end, so shapes stay valid)."""
    return lambda tables, positions, dtype: original(tables, (positions + 1).clamp(max=tables.max_seq - 1), dtype)


def _ring_slot_plus_one(original: Callable) -> Callable:
    def slots(kv_cache: Any, layer_type: str, positions: torch.Tensor) -> torch.Tensor:
        return original(kv_cache, layer_type, positions + 1 if kv_cache.is_ring(layer_type) else positions)

    return slots


def _sdpa_scaled_by_head_dim(original: Any) -> SimpleNamespace:
    """``torch.nn.functional`` as the decoder sees it, with SDPA at its default scale 1/sqrt(D)."""

    def attention(*args: Any, scale: float | None = None, **kwargs: Any) -> torch.Tensor:
        return original.scaled_dot_product_attention(*args, scale=None, **kwargs)

    return SimpleNamespace(**{**vars(original), "scaled_dot_product_attention": attention})


def _norm_without_v_norm(original: Callable) -> Callable:
    return lambda x, weight, eps: x if weight is None else original(x, weight, eps)


class _QueryNormAfterRope:
    """The q norm's weight applied after RoPE, ``R(x^) * w`` instead of ``R(x^ * w)`` (equal only for
    a constant weight): each layer's forward normalizes q without its weight, and the first
    ``apply_rope`` call of that forward (the query's) multiplies the weight in afterwards."""

    def __init__(self) -> None:
        self.pending: torch.Tensor | None = None

    def forward(self, original: Callable) -> Callable:
        def call(layer: Any, *args: Any, **kwargs: Any) -> Any:
            weight, layer.q_norm = layer.q_norm, None
            self.pending = weight
            try:
                return original(layer, *args, **kwargs)
            finally:
                layer.q_norm, self.pending = weight, None

        return call

    def rope(self, original: Callable) -> Callable:
        def call(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
            rotated = original(x, cos, sin)
            if self.pending is None:
                return rotated
            weight, self.pending = self.pending, None
            return (rotated.float() * weight.float()).type_as(rotated)

        return call


_q_norm_after_rope = _QueryNormAfterRope()
_window_plus_one = with_argument(2, lambda window: window + 1)
_keep_placeholders = with_argument(1, lambda placeholder_ids: ())

CATALOGUE: tuple[Fault, ...] = (
    Fault(
        "sliding-window-off-by-one",
        "sliding layers see window + 1 keys (k >= q - window instead of k > q - window)",
        ((rules, "within_window", _window_plus_one), (masks, "within_window", _window_plus_one)),
    ),
    Fault(
        "sliding-window-ignored",
        "sliding layers attend like full layers (no window at all)",
        ((rules, "causal_within_window", lambda original: lambda q, k, window: rules.causal(q, k)),),
    ),
    Fault(
        "padding-keys-visible",
        "the attention mask ignores key padding (causal pattern only)",
        ((masks.MaskTable, "bool_masks", _ignoring_padding), (masks.MaskTable, "additive_masks", _ignoring_padding)),
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
        ((rope, "inverse_frequencies", _wrong_theta_for_sliding),),
    ),
    Fault(
        "proportional-rope-as-default",
        "full layers rotate every pair (partial_rotary_factor ignored)",
        ((rope, "inverse_frequencies", _proportional_as_default),),
    ),
    Fault(
        "partial-rope-neox-exponents",
        "proportional RoPE with exponents over the rotated dims (2i / rotary_dim), not the head dim",
        ((rope, "inverse_frequencies", _neox_partial_rope),),
    ),
    Fault(
        "rope-positions-from-one",
        "RoPE positions counted from 1",
        ((rope.RopeTables, "lookup", _positions_from_one),),
    ),
    Fault(
        "ring-slot-off-by-one",
        "a sliding layer's ring cache writes position p to slot (p + 1) mod W",
        ((cache.StaticKVCache, "slots", _ring_slot_plus_one),),
    ),
    Fault(
        "shared-kv-first-producer",
        "KV-shared layers read the first layer of their type instead of the last non-shared one",
        ((TextConfigView, "kv_sources", _first_producer),),
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
        ((decoder, "F", _sdpa_scaled_by_head_dim),),
    ),
    Fault(
        "gelu-erf",
        "the exact (erf) GELU instead of gelu_pytorch_tanh",
        ((decoder, "gelu_tanh", lambda original: F.gelu),),
    ),
    Fault(
        "embedding-unscaled",
        "embedding rows not multiplied by sqrt(hidden size)",
        (after_init(embedding.TokenEmbedding, lambda stage: stage.scale.fill_(1.0)),),
    ),
    Fault(
        "placeholders-reach-ple",
        "image/video/audio placeholder ids index the per-layer embedding table (not mapped to pad)",
        ((inputs, "llm_ids", _keep_placeholders), (runtime_module, "llm_ids", _keep_placeholders)),
        needs_vision=True,
    ),
    Fault(
        "v-norm-missing",
        "values are not RMS-normed (the scale-free v_norm is dropped)",
        ((decoder, "rms_norm", _norm_without_v_norm),),
    ),
    Fault(
        "q-norm-after-rope",
        "the q norm's learned weight applied after the rotation instead of before it",
        (
            (decoder.DecoderLayer, "forward", _q_norm_after_rope.forward),
            (decoder, "apply_rope", _q_norm_after_rope.rope),
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
    *VISION_FAULTS,
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
