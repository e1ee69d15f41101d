"""Copies of an embedded model made to reach a numeric edge, shared by the tests that need them."""

from __future__ import annotations

import copy

import torch


def steep(model):
    """``model`` with every layer's query norm scaled by 4: attention scores up to 46 on tiny, past the
    16 that ``finfo(float16).min`` survives in fp16 arithmetic."""
    steeper = copy.deepcopy(model)
    with torch.no_grad():
        for layer in steeper.model.language_model.layers:
            layer.self_attn.q_norm.weight.mul_(4.0)
    return steeper


def overflowing(model):
    """``model`` with layer 3's up projection scaled by 1e6: in fp16 its output leaves the range first."""
    overflows = copy.deepcopy(model)
    with torch.no_grad():
        overflows.model.language_model.layers[3].mlp.up_proj.weight.mul_(1e6)
    return overflows
