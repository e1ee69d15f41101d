"""The patch makers the fault catalogue (:mod:`.catalogue`) is built from: each takes the original
attribute and returns its faulty replacement (see :class:`~.faults.Fault`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import torch

from ...cpu import rope
from ...spec import TextConfigView
from .faults import with_argument


def wrong_theta_for_sliding(original: Callable) -> Callable:
    return lambda spec: original(dataclasses.replace(spec, theta=1_000_000.0) if spec.rope_type == "default" else spec)


def proportional_as_default(original: Callable) -> Callable:
    return lambda spec: original(dataclasses.replace(spec, rope_type="default"))


def neox_partial_rope(original: Callable) -> Callable:
    """Exponents over the rotated dims (``2i / rotary_dim``) instead of the full head dim."""

    def frequencies(spec: Any) -> torch.Tensor:
        if spec.rope_type != "proportional":
            return original(spec)
        rotary = int(spec.partial_rotary_factor * spec.head_dim)
        inv_freq = torch.zeros(spec.head_dim // 2)
        inv_freq[: rotary // 2] = 1.0 / spec.theta ** (torch.arange(0, rotary, 2, dtype=torch.float32) / rotary)
        return inv_freq / spec.factor

    return frequencies


def first_producer(original: property) -> property:
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


def ignoring_padding(original: Callable) -> Callable:
    return lambda table, valid, *args, **kwargs: original(table, torch.ones_like(valid), *args, **kwargs)


def never_restoring(original: Callable) -> Callable:
    """The kept masks' rewrite forbidding newly padded columns but never copying back valid ones."""
    return lambda buffers, buffer, rule, spans, runs, *, restore: (
        None if restore else original(buffers, buffer, rule, spans, runs, restore=restore)
    )


def positions_from_one(original: Callable) -> Callable:
    """RoPE at ``p + 1`` (the last table row stands in past the end, so shapes stay valid)."""
    return lambda tables, positions, dtype: original(tables, (positions + 1).clamp(max=tables.max_seq - 1), dtype)


def ring_slot_plus_one(original: Callable) -> Callable:
    def slots(kv_cache: Any, layer_type: str, positions: torch.Tensor) -> torch.Tensor:
        return original(kv_cache, layer_type, positions + 1 if kv_cache.is_ring(layer_type) else positions)

    return slots


def sdpa_scaled_by_head_dim(original: Any) -> SimpleNamespace:
    """``torch.nn.functional`` as the decoder sees it, with SDPA at its default scale 1/sqrt(D)."""

    def attention(*args: Any, scale: float | None = None, **kwargs: Any) -> torch.Tensor:
        return original.scaled_dot_product_attention(*args, scale=None, **kwargs)

    return SimpleNamespace(**{**vars(original), "scaled_dot_product_attention": attention})


def norm_without_v_norm(original: Callable) -> Callable:
    return lambda x, weight, eps: x if weight is None else original(x, weight, eps)


class QueryNormAfterRope:
    """The q norm's weight applied after RoPE, ``R(x^) * w`` instead of ``R(x^ * w)`` (equal only for
    a constant weight): each layer's attention inputs normalize q without its weight, and the first
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


def rope_angles_in_dtype(original: Callable) -> Callable:
    """position x inv_freq computed in the stage dtype (bf16 rounds positions past 256, and every
    angle by 2^-9 of itself) instead of fp32 then cast."""

    def lookup(table: Any, position_ids: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        freqs = position_ids.to(dtype)[..., None] * rope.inverse_frequencies(table.spec).to(dtype)
        angles = torch.cat((freqs, freqs), dim=-1)
        return angles.cos(), angles.sin()

    return lookup


def chunk_as_decode(original: Callable) -> Callable:
    """Chunked prefill run like decode: a ring layer writes the chunk into its slots before it
    attends, overwriting keys the chunk's earlier queries still need."""

    def run(stack: Any, *args: Any, mode: str, states: Any = None) -> torch.Tensor:
        return original(stack, *args, mode="cache" if mode == "chunk" else mode, states=states)

    return run


def masks_over_the_cache(original: Callable) -> Callable:
    """Chunk masks over the cache's slots alone (what :func:`chunk_as_decode` attends over)."""
    return lambda stack, positions, written, blocks=None, *, before=None: original(stack, positions, written, blocks)


def reusing_layers_over_the_cache(original: Callable) -> Callable:
    """A single-shot prefill whose KV-sharing layers read the producer's cache (a sliding producer's
    ring holds only the prompt's last ``window`` positions by then) instead of the producer's K/V of
    this prefill, the bug HF's Gemma 4 attention warns about: early queries lose their keys."""

    def run(
        stack: Any,
        hidden: torch.Tensor,
        per_layer_inputs: torch.Tensor,
        positions: torch.Tensor,
        keep: torch.Tensor,
        masks: Any,
        layers: range,
        *,
        mode: str,
        states: Any = None,
    ) -> torch.Tensor:
        if mode != "own" or layers.stop <= stack.first_reusing_layer:
            return original(stack, hidden, per_layer_inputs, positions, keep, masks, layers, mode=mode, states=states)
        split = max(layers.start, stack.first_reusing_layer)
        hidden = original(
            stack,
            hidden,
            per_layer_inputs,
            positions,
            keep,
            masks,
            range(layers.start, split),
            mode=mode,
            states=states,
        )
        over_cache = stack.cache_masks(positions, keep.sum(dim=1))
        return original(stack, hidden, per_layer_inputs, positions, keep, over_cache, range(split, layers.stop),
                        mode="cache", states=states)  # fmt: skip

    return run


q_norm_after_rope = QueryNormAfterRope()
window_plus_one = with_argument(2, lambda window: window + 1)
keep_placeholders = with_argument(1, lambda placeholder_ids: ())
