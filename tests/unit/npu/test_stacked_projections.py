"""``DecoderLayer.stack_projections``: q, k and v (those a layer has) as one product, gate and up as
one, over their weights stacked into a copy. Checked here: the stacked runtime against HF (prefill
and decode, float32 at ``tolerances.RELATIVE``: the same dot products, so the PyTorch backend's
tolerance holds unchanged), which projections each kind of layer stacks (K = V layers, layers that
reuse K/V), that the model's weights are not touched, and what it refuses. The one program lowered
from stacked layers is ``tests/parity/test_executorch.py``."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from gemma4_static.npu.decoder import StackedProjections
from gemma4_static.oracle.checks import parity
from gemma4_static.oracle.references.hf import hf_prefill
from gemma4_static.oracle.references.samples import text_prompt
from gemma4_static.oracle.results.report import assert_rows_pass
from gemma4_static.ports.static import StaticRuntimePort
from gemma4_static.runtime import StaticGemma4Runtime
from gemma4_static.spec.model import text_module

SEPARATE = ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj")


def stacked_runtime(model, **options) -> StaticGemma4Runtime:
    runtime = StaticGemma4Runtime(model, **options)
    for layer in runtime.modules.layers:
        layer.stack_projections()
    return runtime


@pytest.mark.usefixtures("hf_answers_kept")
@pytest.mark.parametrize("fixture", ["tiny_model", "moe_geometry_model"])
def test_stacked_layers_prefill_and_decode_as_hf(fixture, request, report):
    """The tiny model (layers that reuse K/V) and the 26B-A4B geometry (K = V full layers), a ragged
    batch of two: 2 prefill rows and 2 decode rows compared, argmaxes exactly."""
    model = request.getfixturevalue(fixture)
    runtime = stacked_runtime(model, max_seq=16, batch_size=2)
    prompt = text_prompt(model.config, [7, 4], seed=9)
    vocab = model.config.get_text_config().vocab_size
    tokens = torch.randint(3, min(vocab, 400), (2, 4), generator=torch.Generator().manual_seed(2))
    theirs = hf_prefill(model, prompt).logits[torch.arange(2), prompt.last_index]
    rows = parity.logits_rows(runtime.prefill(prompt.input_ids, prompt.attention_mask), theirs, torch.float32)
    port = StaticRuntimePort.around(runtime, model.config)
    rows += parity.decode_rows(model, port, prompt, tokens, torch.float32)
    compared = [row for row in rows if row.metric == "max abs diff"]
    assert [(row.stage, row.check) for row in compared] == [
        ("prefill logits", "last valid token per row"),
        ("decode steps", "row 0 logits"),
        ("decode steps", "row 1 logits"),
    ]
    assert_rows_pass(rows)
    report(f"stacked projections ({fixture}): worst logits |diff| {max(row.value for row in compared):.3g}")


def test_each_kind_of_layer_stacks_what_it_has(tiny_model, moe_geometry_model):
    """q|k|v on a producing layer, q|k on a K = V layer, q alone (unstacked) on a layer that reuses
    K/V; gate|up everywhere. The separate projections leave the layer (no second copy is lowered or
    quantized)."""
    kinds = set()
    for model in (tiny_model, moe_geometry_model):
        heads = model.config.get_text_config().num_attention_heads
        for layer, weights in zip(stacked_runtime(model, max_seq=8).modules.layers, text_module(model).layers, strict=True):
            names = {name.split(".")[0] for name, _ in layer.named_parameters()}
            assert names.isdisjoint(SEPARATE[1:]) and ("q_proj" in names) == layer.reuses_kv
            assert layer.gate_up_proj.sizes == (weights.mlp.gate_proj.out_features, weights.mlp.up_proj.out_features)
            if layer.reuses_kv:
                kinds.add("reuses K/V")
                assert layer.qkv_proj is None and layer.q_proj is weights.self_attn.q_proj
                continue
            stacked = tuple(size // layer.head_dim for size in layer.qkv_proj.sizes)
            kv = (layer.num_kv_heads,) * (1 if weights.self_attn.v_proj is None else 2)
            kinds.add("K = V" if len(kv) == 1 else "K, V")
            assert stacked == (heads, *kv)
    assert kinds == {"K, V", "K = V", "reuses K/V"}  # every kind met


def test_the_stacked_weights_are_a_copy_in_the_layers_order(tiny_model):
    layer = StaticGemma4Runtime(tiny_model, max_seq=8).modules.layers[0]
    q, k, v = layer.q_proj.weight, layer.k_proj.weight, layer.v_proj.weight
    before = q.clone()
    layer.stack_projections()
    stacked = layer.qkv_proj.linear.weight
    assert torch.equal(stacked, torch.cat((q, k, v))) and stacked.data_ptr() != q.data_ptr()
    stacked.data.zero_()
    assert torch.equal(q, before)  # the model's own weights are not the stacked ones


def test_stacking_twice_changes_nothing(tiny_model):
    layer = StaticGemma4Runtime(tiny_model, max_seq=8).modules.layers[0]
    layer.stack_projections()
    attention, feedforward = layer.qkv_proj, layer.gate_up_proj
    layer.stack_projections()
    assert layer.qkv_proj is attention and layer.gate_up_proj is feedforward


def test_the_product_splits_in_the_projections_order():
    generator = torch.Generator().manual_seed(0)
    projections = [nn.Linear(16, width, bias=False) for width in (8, 3, 5)]
    for projection in projections:
        nn.init.normal_(projection.weight, generator=generator)
    x = torch.randn(2, 3, 16, generator=generator)
    parts = StackedProjections(*projections)(x)
    assert [part.shape for part in parts] == [(2, 3, 8), (2, 3, 3), (2, 3, 5)]
    for part, projection in zip(parts, projections, strict=True):
        torch.testing.assert_close(part, projection(x), rtol=0, atol=1e-6)  # float32 sums of 16 products


@pytest.mark.parametrize(
    "projection", [nn.Linear(4, 4, bias=True), nn.Conv1d(4, 4, 1)], ids=["with a bias", "not a linear"]
)
def test_refuses_what_it_cannot_stack(projection):
    with pytest.raises(TypeError, match=r"projections must be bias-free nn.Linear modules, got (Linear|Conv1d)\("):
        StackedProjections(nn.Linear(4, 2, bias=False), projection)
