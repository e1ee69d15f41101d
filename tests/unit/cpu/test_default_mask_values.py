"""The runtime's default additive mask values, the default suite's twin of the numerics lane's fp16
checks: in float32 and bfloat16 ``finfo.min`` as HF uses; in float16 a fill with headroom (any score a
layer can add, tens of thousands, stays finite in fp16 arithmetic, where ``finfo.min`` minus a score
of 16 is ``-inf`` and a fully masked row NaN) that still zeroes every masked weight. A tiny model made
steep (scores up to 46) shows it through the mask-value group: the default overflows nowhere, ``finfo.min``
does."""

from __future__ import annotations

import math

import pytest
import torch

from gemma4_static.cpu.checks import default_mask_value, mask_fill_value
from gemma4_static.oracle.flow.verify import run_verification
from gemma4_static.oracle.numerics.gates import MASKED_WEIGHT_BOUND
from gemma4_static.oracle.numerics.parity_numerics import hf_score_bound, mask_value_check
from gemma4_static.oracle.options import VerifyOptions
from gemma4_static.spec.config import read_text_config
from tests import made_models

SCORE_BOUND = 30000.0  # far past any q.k of normed queries and keys (E2B's bound is in the tens)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fp32_and_bf16_default_to_finfo_min_as_hf(dtype):
    assert default_mask_value(dtype) == mask_fill_value(None, dtype) == torch.finfo(dtype).min


def test_the_fp16_default_leaves_headroom_and_zeroes_masked_weights():
    fill = torch.tensor(default_mask_value(torch.float16), dtype=torch.float16)
    assert mask_fill_value(None, torch.float16) == float(fill)
    assert torch.isfinite(fill - torch.tensor(SCORE_BOUND, dtype=torch.float16))  # fp16 arithmetic: headroom
    assert float(fill) <= -1e4 and float(torch.exp(fill.float() + 100.0)) == 0.0  # a masked key weighs nothing
    overflowing = torch.tensor(torch.finfo(torch.float16).min, dtype=torch.float16)
    assert torch.isinf(overflowing - torch.tensor(16.0, dtype=torch.float16))  # why not finfo.min


def test_the_fp16_default_overflows_nowhere_on_a_steep_model(tiny_model):
    steep = made_models.steep(tiny_model)  # scores up to 46: past what finfo.min survives in fp16
    for fill, overflows in ((None, 0.0), (torch.finfo(torch.float16).min, 1.0)):
        rows = run_verification(steep, VerifyOptions(dtype=torch.float16, groups=("mask-value",), mask_value=fill))
        assert [row.value for row in rows] == [0.0, overflows], [(row.check, row.value) for row in rows]


def test_the_mask_value_rows_name_the_fill_the_keys_and_the_dtype():
    """The two rows of the mask-value check as a reader sees them: the masked keys' weight against its
    bound (``keys x exp(fill + 2 x bound)``), and whether the fill minus the score bound overflows, in
    the dtype named."""
    weight, overflow = mask_value_check(-100.0, torch.float16, 64, 30.0)
    assert weight.check == "-100 over 64 keys, score bound 30" and weight.metric == "masked weight bound"
    assert weight.value == pytest.approx(64 * math.exp(-40.0)) and weight.tolerance == MASKED_WEIGHT_BOUND
    assert overflow.check == "-100 - score bound in float16" and (overflow.value, overflow.tolerance) == (0, 0.0)
    (_, overflow) = mask_value_check(torch.finfo(torch.float16).min, torch.float16, 64, 30.0)
    assert overflow.value == 1 and overflow.failed


def test_the_score_bound_takes_the_key_norms_weight_only_where_the_norm_scales(tiny_model, monkeypatch):
    """``D max|w_q| max|w_k|`` with ``w_k`` of the layer that produced the K/V; a key norm without a
    scale counts as 1."""
    layers = tiny_model.model.language_model.layers
    sources = read_text_config(tiny_model.config).kv_sources

    def bound(key_weight) -> float:
        return max(
            layer.self_attn.head_dim
            * float(layer.self_attn.q_norm.weight.abs().max())
            * key_weight(layers[source].self_attn.k_norm)
            for layer, source in zip(layers, sources, strict=True)
        )

    assert hf_score_bound(tiny_model) == bound(lambda norm: float(norm.weight.abs().max()))
    for source in set(sources):
        monkeypatch.setattr(layers[source].self_attn.k_norm, "with_scale", False)
    assert hf_score_bound(tiny_model) == bound(lambda norm: 1.0) != bound(lambda norm: float(norm.weight.abs().max()))
