"""Both sides of an integer profile, calibrated on the same sample prompts: this runtime's stages
quantized by :mod:`gemma4_static.quant`, and HF's own modules quantized in the same scheme (its
figure beside ours: the same mechanics on HF's forward, its ranges observed in its own run)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import torch

from ...ports.static import StaticRuntimePort
from ...quant import QuantProfile, Scheme, quantize
from ...quant.profile import PROJECTIONS
from ...quant.sites import Site, linear_site
from ...spec import text_module
from ..references.hf import hf_prefill
from ..references.samples import Prompt

CALIBRATION_SEEDS = (11, 12, 13, 14)  # sample prompts of the session's shape, other content than the one checked


def calibrated_runtime(port: StaticRuntimePort, scheme: Scheme, prompts: list[Prompt]) -> QuantProfile:
    """Quantize ``port``'s runtime in ``scheme``, its activation ranges observed over the prefill of
    ``prompts`` with every layer run on every position (``keep_intermediates``)."""
    profile = quantize(port.runtime.modules, scheme)
    profile.calibrate(lambda: [port.prefill(prompt, keep_intermediates=True) for prompt in prompts])
    return profile


@torch.no_grad()
def calibrated_hf(model: Any, ours: QuantProfile, prompts: list[Prompt]) -> tuple[Any, QuantProfile]:
    """A copy of HF ``model`` quantized at the sites of ``ours`` (the runtime's profile: decoder and
    vision encoder projections, the PLE projection, tables and LM head as its scheme says; HF's
    unused projections of layers that reuse K/V stay as they are), calibrated over HF's own forward
    on ``prompts``."""
    quantized = copy.deepcopy(model)
    names = {site.name for site in ours.sites}
    profile = QuantProfile(ours.scheme, [site for site in _hf_sites(quantized, ours.scheme, names)])
    profile.calibrate(lambda: [hf_prefill(quantized, prompt) for prompt in prompts])
    return quantized, profile


HF_KINDS = {
    **{kind: kind for kind in PROJECTIONS},
    "per_layer_input_gate": "ple_gate",
    "per_layer_projection": "ple_projection",
}
TABLES = {"embed_tokens": "token embedding table", "embed_tokens_per_layer": "PLE table"}


def _hf_sites(model: Any, scheme: Scheme, names: set[str]) -> Iterator[Site]:
    """HF's modules at the runtime's site ``names`` (wrapped only where the runtime has the site)."""
    act, bits, group_size = scheme.activation_bits, scheme.weight_bits, scheme.group_size
    text = text_module(model)
    for table, name in TABLES.items():
        if name in names:
            yield Site(name, (), getattr(text, table), "weight", weight_bits=scheme.table_bits)
    if "PLE projection" in names:
        yield linear_site("PLE projection", (), text, "per_layer_model_projection", bits, group_size, act)
    vision = getattr(getattr(model, "model", None), "vision_tower", None)
    for index, layer in enumerate([] if vision is None else vision.encoder.layers):
        for kind in PROJECTIONS:
            parent = getattr(layer.self_attn if kind in PROJECTIONS[:4] else layer.mlp, kind)
            yield linear_site(f"vision layer {index} {kind}", (), parent, "linear", bits, group_size, act)
    for index, layer in enumerate(text.layers):
        for kind, ours in HF_KINDS.items():
            parent = layer.self_attn if kind in PROJECTIONS[:4] else layer.mlp if kind in PROJECTIONS else layer
            if f"layer {index} {ours}" in names:
                yield linear_site(f"layer {index} {ours}", (), parent, kind, bits, group_size, act)
    if "LM head" in names:
        yield linear_site("LM head", (), model, "lm_head", scheme.head_bits, None, act)
