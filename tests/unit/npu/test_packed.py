"""``backend="torch-packed"`` (:mod:`~gemma4_static.npu.packed`): the decoder projections and the LM
head over weights oneDNN reordered once. Its parity with HF is ``tests/parity/test_decode_parity.py``
(the same tolerances as ``torch``); here: the product itself, which modules it replaces (and which
it leaves alone), the reordered copy's lifetime, export, and what it refuses."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from gemma4_static.npu import packed
from gemma4_static.npu.packed import PackedHeadMatmul, PackedLinear, packed_linear, packing_missing, reordered
from gemma4_static.oracle.results.tolerances import RELATIVE
from gemma4_static.runtime import StaticGemma4Runtime

BF16_MISSING = packing_missing(torch.bfloat16)  # a CPU (or kernel set) without oneDNN's bfloat16 kernels
needs_bf16 = pytest.mark.skipif(BF16_MISSING is not None, reason=f"reordered bfloat16 weights: {BF16_MISSING}")


def _weight(out_features: int, in_features: int, dtype: torch.dtype) -> torch.Tensor:
    return torch.randn(out_features, in_features, generator=torch.Generator().manual_seed(0)).to(dtype)


@pytest.mark.parametrize("shape", [(1, 1, 64), (2, 5, 64), (7, 64)])
def test_the_product_is_f_linear_to_float32_rounding(shape):
    """float32: the same dot products summed in another order, within ``RELATIVE`` (2e-5 of the
    largest output's magnitude, the suite's float32 summation-order tolerance); any leading shape."""
    weight = _weight(300, 64, torch.float32)
    x = torch.randn(shape, generator=torch.Generator().manual_seed(1))
    expected = F.linear(x, weight)
    got = packed_linear(x, weight)
    assert got.shape == expected.shape
    assert (got - expected).abs().max() <= RELATIVE[torch.float32] * max(1.0, float(expected.abs().max()))


@needs_bf16
def test_bfloat16_rounds_the_same_float32_sums_once():
    """bfloat16: both kernels sum in float32 and round once, so at most one bfloat16 step apart."""
    weight = _weight(300, 64, torch.bfloat16)
    x = torch.randn(3, 64, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    expected, got = F.linear(x, weight).float(), packed_linear(x, weight).float()
    step = torch.finfo(torch.bfloat16).eps * expected.abs().clamp_min(1.0)
    assert ((got - expected).abs() <= step).all()


def test_the_reordered_copy_is_made_once_and_again_when_the_weight_is_edited():
    weight = _weight(32, 16, torch.float32)
    first = reordered(weight)
    assert reordered(weight) is first  # shared by every caller of this weight
    x = torch.randn(1, 16)
    before = packed_linear(x, weight)
    weight.mul_(2)  # edited in place: the version moves
    assert reordered(weight) is not first
    assert torch.equal(packed_linear(x, weight), 2 * before)  # doubling every product is exact in float32


@needs_bf16
def test_the_reordered_copy_is_made_again_when_the_weights_storage_is_swapped():
    linear = nn.Linear(16, 32, bias=False)
    kept = reordered(linear.weight)
    linear.to(torch.bfloat16)  # the same parameter, its storage swapped
    assert reordered(linear.weight).dtype == torch.bfloat16 and kept.dtype == torch.float32


def test_the_copy_lives_as_long_as_its_weight():
    weight = _weight(32, 16, torch.float32)
    reordered(weight)
    assert weight in packed._reordered
    count = len(packed._reordered)
    del weight
    assert len(packed._reordered) == count - 1


def test_the_runtime_packs_its_own_projections_and_head_not_the_models(tiny_model):
    runtime = StaticGemma4Runtime(tiny_model, max_seq=16, backend="torch-packed")
    other = StaticGemma4Runtime(tiny_model, max_seq=24, backend="torch-packed")
    plain = StaticGemma4Runtime(tiny_model, max_seq=16)
    for layer, twin, unpacked in zip(runtime.modules.layers, other.modules.layers, plain.modules.layers, strict=True):
        linears = {name for name, child in unpacked.named_children() if isinstance(child, nn.Linear)}
        assert {"q_proj", "o_proj", "gate_proj", "up_proj", "down_proj"} <= linears
        for name in linears:
            assert isinstance(getattr(layer, name), PackedLinear), name
            assert getattr(layer, name).weight is getattr(unpacked, name).weight  # shared, not copied
        assert reordered(layer.q_proj.weight) is reordered(twin.q_proj.weight)  # one copy for both runtimes
    assert isinstance(runtime.modules.lm_head.matmul, PackedHeadMatmul)
    assert runtime.stages is runtime.modules
    assert not any(isinstance(module, PackedLinear) for module in tiny_model.modules())
    assert not any(isinstance(module, PackedLinear) for module in plain.modules.layers[0].modules())


def test_an_exported_stage_is_the_plain_stage(tiny_model):
    """A stage exported from ``torch-packed`` runs ``F.linear`` (the deployed graph is ``torch``'s)."""
    runtime = StaticGemma4Runtime(tiny_model, max_seq=16, backend="torch-packed")
    head = runtime.modules.lm_head
    hidden = torch.randn(1, 3, head.weight.shape[1])
    exported = torch.export.export(head, (hidden,))
    targets = {str(node.target) for node in exported.graph.nodes if node.op == "call_function"}
    assert "aten.linear.default" in targets
    assert not any("mkldnn" in target for target in targets)
    expected = head(hidden)  # the same products through oneDNN's reordered kernel: summation order only
    bound = RELATIVE[torch.float32] * max(1.0, float(expected.abs().max()))
    assert (exported.module()(hidden) - expected).abs().max() <= bound


def test_a_dtype_without_reordered_kernels_is_refused_naming_it(tiny_model):
    assert packing_missing(torch.float32) is None
    assert "got torch.float16" in packing_missing(torch.float16)
    half = copy.deepcopy(tiny_model).to(torch.float16)
    with pytest.raises(ValueError, match=r"backend='torch-packed' cannot run here: .*got torch.float16"):
        StaticGemma4Runtime(half, max_seq=8, backend="torch-packed")


def test_an_integer_scheme_on_packed_weights_is_refused(tiny_model):
    with pytest.raises(ValueError, match=r"backend='torch-packed' runs float weights .*, got quant='a8w8'"):
        StaticGemma4Runtime(tiny_model, max_seq=8, backend="torch-packed", quant="a8w8")


@pytest.mark.parametrize("limit", [None, "AVX2"], ids=["the-cpu", "a-kernel-set"])
def test_a_cpu_or_kernel_set_without_bfloat16_kernels_is_named(monkeypatch, limit):
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: False)
    if limit is None:
        monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    else:
        monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", limit)
    where = "this CPU" if limit is None else "this CPU with ONEDNN_MAX_CPU_ISA=AVX2"
    assert packing_missing(torch.bfloat16) == (
        f"oneDNN has no bfloat16 kernels on {where} (they need AVX-512 BW/VL/DQ or AVX-NE-CONVERT)"
    )
    assert packing_missing(torch.float32) is None


def test_a_machine_without_onednn_is_named(monkeypatch):
    monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda: False)
    assert "no oneDNN" in packing_missing(torch.float32)
    monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda: True)
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: False)
    assert "no bfloat16 kernels" in packing_missing(torch.bfloat16)
    assert packing_missing(torch.float32) is None
