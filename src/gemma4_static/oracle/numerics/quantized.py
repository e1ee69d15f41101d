"""HF's own modules quantized in an integer scheme, the figure beside this runtime's (the same
mechanics as :mod:`gemma4_static.quant` on HF's forward, its ranges observed in its own run on the
same calibration prompts)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from ...quant import QuantProfile, Scheme
from ...quant.profile import PROJECTIONS
from ...quant.sites import Site, linear_site
from ...spec import text_module
from ..references.hf import hf_prefill
from ..references.samples import Prompt

CALIBRATION_SEEDS = (11, 12, 13, 14)  # sample prompts of the session's shape, other content than the one checked


@torch.no_grad()
def calibrated_hf(model: Any, scheme: Scheme, prompts: list[Prompt]) -> tuple[Any, QuantProfile]:
    """A copy of HF ``model`` quantized where the runtime quantizes (decoder and vision encoder
    projections, the PLE projection, tables and LM head as ``scheme`` says; projections HF holds but
    never calls, those of layers that reuse K/V, stay as they are), calibrated over HF's own forward
    on ``prompts``."""
    quantized = copy.deepcopy(model)
    profile = QuantProfile(scheme, list(_hf_sites(quantized, scheme)))
    profile.calibrate(lambda: [hf_prefill(quantized, prompt) for prompt in prompts], unreached="float")
    return quantized, profile


HF_KINDS = {
    **{kind: kind for kind in PROJECTIONS},
    "per_layer_input_gate": "ple_gate",
    "per_layer_projection": "ple_projection",
}
TABLES = {"embed_tokens": "token embedding table", "embed_tokens_per_layer": "PLE table"}


def _hf_sites(model: Any, scheme: Scheme) -> Iterator[Site]:
    act, bits, group_size = scheme.activation_bits, scheme.weight_bits, scheme.group_size
    text = text_module(model)
    for table, name in TABLES.items():
        if scheme.table_bits is not None and getattr(text, table, None) is not None:
            yield Site(name, (), getattr(text, table), "weight", weight_bits=scheme.table_bits)
    if getattr(text, "per_layer_model_projection", None) is not None:
        yield linear_site("PLE projection", (), text, "per_layer_model_projection", bits, group_size, act)
    vision = getattr(getattr(model, "model", None), "vision_tower", None)
    for index, layer in enumerate([] if vision is None else vision.encoder.layers):
        for kind in PROJECTIONS:
            parent = getattr(layer.self_attn if kind in PROJECTIONS[:4] else layer.mlp, kind)
            yield linear_site(f"vision layer {index} {kind}", (), parent, "linear", bits, group_size, act)
    for index, layer in enumerate(text.layers):
        for kind, ours in HF_KINDS.items():
            parent = layer.self_attn if kind in PROJECTIONS[:4] else layer.mlp if kind in PROJECTIONS else layer
            if isinstance(getattr(parent, kind, None), nn.Linear):
                yield linear_site(f"layer {index} {ours}", (), parent, kind, bits, group_size, act)
    if scheme.head_bits is not None:
        yield linear_site("LM head", (), model, "lm_head", scheme.head_bits, None, act)
