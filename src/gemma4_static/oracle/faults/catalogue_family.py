"""Porting bugs of the rest of the family (see :mod:`.catalogue`): K = V attention on full layers,
their own KV-head count (and the query heads each shares), and the mixture-of-experts router. They
show on a model with the feature (the 31B and 26B-A4B geometries); elsewhere they are n/a."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import torch

from ...npu import decoder, experts
from ...spec import FULL_ATTENTION, SLIDING_ATTENTION, LayerTypeSpec
from ...spec import config as spec_config
from .faults import Fault


def _key_as_value(original: Callable) -> Callable:
    """On a K = V layer, attend over the rotated, k-normed keys as values (the K cache read as V)."""

    def project_kv(layer: Any, normed: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> tuple:
        key, value = original(layer, normed, cos, sin)
        return (key, key) if layer.v_proj is None else (key, value)

    return project_kv


def _sliding_kv_heads_everywhere(original: Callable) -> Callable:
    """Full layers get the sliding layers' KV-head count (``num_key_value_heads``), not their own."""

    def read(config: Any, layer_type: str) -> LayerTypeSpec:
        spec = original(config, layer_type)
        if layer_type != FULL_ATTENTION:
            return spec
        return LayerTypeSpec(spec.head_dim, original(config, SLIDING_ATTENTION).num_kv_heads, spec.rope)

    return read


def _kv_heads_tiled_in_decode(original: Any) -> SimpleNamespace:
    """``torch.nn.functional`` as the decoder sees it: a decode step's attention (its query heads
    grouped per K/V head, no ``enable_gqa``) with K/V tiled across the heads (``repeat``, not
    ``repeat_interleave``): query head ``h`` reads K/V head ``h % kv_heads``, not ``h // group``."""

    def attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        kv_heads, group = key.shape[1], query.shape[2]
        if kwargs.get("enable_gqa") or kv_heads == 1:
            return original.scaled_dot_product_attention(query, key, value, **kwargs)
        heads = query.reshape(query.shape[0], kv_heads * group, 1, query.shape[-1])  # head h = j * group + i
        tiled = original.scaled_dot_product_attention(
            heads, key.repeat(1, group, 1, 1), value.repeat(1, group, 1, 1), **kwargs
        )
        return tiled.reshape(query.shape)

    return SimpleNamespace(**{**vars(original), "scaled_dot_product_attention": attention})


def _softmax_in_bf16(original: Any) -> SimpleNamespace:
    """``torch.nn.functional`` as the router sees it, its softmax computed in bfloat16."""

    def softmax(scores: torch.Tensor, dim: int, dtype: torch.dtype | None = None) -> torch.Tensor:
        return original.softmax(scores.to(torch.bfloat16), dim=dim).to(dtype or scores.dtype)

    return SimpleNamespace(**{**vars(original), "softmax": softmax})


def _ties_to_the_higher_index(original: Any) -> SimpleNamespace:
    """``torch`` as the router sees it, its ``topk`` taken over the experts in reversed order (exact ties
    then go the other way)."""

    def topk(values: torch.Tensor, k: int, dim: int = -1) -> tuple[torch.Tensor, torch.Tensor]:
        top, index = original.topk(values.flip(dim), k=k, dim=dim)
        return top, values.shape[dim] - 1 - index

    return SimpleNamespace(**{**vars(original), "topk": topk})


FAMILY_FAULTS: tuple[Fault, ...] = (
    Fault(
        "k-cache-as-v",
        "K = V full layers attend over the rotated, k-normed keys as values instead of v_norm(k_proj(x))",
        ((decoder.DecoderLayer, "project_kv", _key_as_value),),
        needs_text="attention_k_eq_v",
    ),
    Fault(
        "global-kv-heads-of-sliding",
        "full layers sized with the sliding layers' KV-head count (num_key_value_heads, not the global one)",
        ((spec_config, "_read_layer_type", _sliding_kv_heads_everywhere),),
        needs_text="attention_k_eq_v",
        raises="a full layer's cache sized with the sliding layers' KV-head count does not fit the K/V its "
        "weights project: the cache write raises",
    ),
    Fault(
        "decode-kv-heads-tiled",
        "in decode, query head h attends K/V head h % kv_heads (K/V repeated, not repeat_interleaved), "
        "not its own group's h // (heads / kv_heads)",
        ((decoder, "F", _kv_heads_tiled_in_decode),),
        needs_text="num_global_key_value_heads",  # full layers whose KV heads each serve several query heads
    ),
    Fault(
        "router-softmax-bf16",
        "the router's softmax computed in bfloat16 (HF: float32)",
        ((experts, "F", _softmax_in_bf16),),
        needs_text="enable_moe_block",
    ),
    Fault(
        "router-ties-reversed",
        "the router's top-k breaks exact ties the other way round from torch.topk (its top k of the reversed order)",
        ((experts, "torch", _ties_to_the_higher_index),),
        needs_text="enable_moe_block",
    ),
)
