"""The low-precision profiles (bf16, fp16) against HF in float64, gated per profile
(``oracle/gates.py`` says how each threshold was derived); a wrong mask value and a RoPE shift fail
the gates; no NaN or inf for the default mask values over padding layouts; the overflow report
names the first stage that overflows."""

from __future__ import annotations

import copy
import dataclasses
import math

import pytest
import torch
from hypothesis import event, example, given
from hypothesis import strategies as st

from gemma4_static.commands import cli
from gemma4_static.npu.packed import packing_missing
from gemma4_static.oracle.faults.catalogue import faults_named
from gemma4_static.oracle.flow.verify import run_verification
from gemma4_static.oracle.numerics.gates import GATES
from gemma4_static.oracle.numerics.metrics import matched_prefix, measure, top_k_check
from gemma4_static.oracle.numerics.overflow import recorded_ranges
from gemma4_static.oracle.options import VerifyOptions
from gemma4_static.oracle.references import models
from gemma4_static.oracle.references.samples import text_prompt
from gemma4_static.oracle.results.report import assert_rows_pass, format_row
from gemma4_static.runtime import StaticGemma4Runtime
from tests import made_models

PROFILES = list(GATES)
# every check group of a profile run that depends on the dtype (masks are dtype-free, checked in fp32)
NUMERIC_CHECKS = ("inputs", "rope", "mask-value", "layers", "chunked-prefill", "decode", "overflow")
BF16_PACKING_MISSING = packing_missing(torch.bfloat16)  # a CPU or kernel set without oneDNN's bf16 kernels


def _gated(model, dtype, report, label: str, **kwargs) -> list:
    rows = run_verification(model, VerifyOptions(dtype=dtype, groups=NUMERIC_CHECKS, **kwargs))
    sqnr = [row for row in rows if row.metric == "SQNR dB"]
    worst = min(sqnr, key=lambda row: row.value)
    report(f"{label} {dtype}: worst SQNR {worst.value:.1f} dB at {worst.stage} / {worst.check} (HF {worst.hf:.1f})")
    return rows


@pytest.mark.numerics  # the default run has them through `verify --dtype` (test_verify_command.py)
@pytest.mark.parametrize("dtype", PROFILES, ids=str)
def test_tiny_profiles_pass_their_gates(tiny_model, dtype, report):
    assert_rows_pass(_gated(tiny_model, dtype, report, "tiny"))


@pytest.mark.numerics
@pytest.mark.parametrize("dtype", PROFILES, ids=str)
def test_e2b_geometry_profiles_pass_their_gates(e2b_model, dtype, report):
    assert_rows_pass(_gated(e2b_model, dtype, report, "e2b-geometry"))


@pytest.mark.numerics
@pytest.mark.skipif(BF16_PACKING_MISSING is not None, reason=f"torch-packed in bfloat16: {BF16_PACKING_MISSING}")
def test_packed_weights_pass_the_bfloat16_gates(tiny_model, report):
    """``torch-packed`` in bfloat16: oneDNN's kernels over reordered weights, gated like ``torch``'s."""
    assert_rows_pass(_gated(tiny_model, torch.bfloat16, report, "tiny torch-packed", backend="torch-packed"))


def test_checkpoint_profiles_pass_their_gates(checkpoint_model, report):
    for dtype in PROFILES:
        assert_rows_pass(_gated(checkpoint_model, dtype, report, "checkpoint"))


@pytest.mark.numerics
def test_a_mask_value_of_minus_one_fails_the_gates(tiny_model):
    """-1 leaves masked keys about e^-1 of an allowed key's weight: the soft tokens (padded patches
    leak into the vision encoder), the mask-value row and the hidden states fail."""
    rows = run_verification(tiny_model, VerifyOptions(dtype=torch.bfloat16, groups=NUMERIC_CHECKS, mask_value=-1.0))
    failed = {(row.stage, row.metric) for row in rows if row.failed}
    assert {("vision prefill", "SQNR dB"), ("mask value", "masked weight bound")} <= failed
    assert {("decoder layers", "SQNR dB"), ("prefill logits", "SQNR dB")} <= failed


@pytest.mark.numerics
def test_a_rope_shift_fails_the_gates(tiny_model):
    """A uniform shift cancels in q.k, but the RoPE rows and the cached K (stored rotated) see it."""
    with faults_named(["rope-positions-from-one"])[0].injected():
        rows = run_verification(tiny_model, VerifyOptions(dtype=torch.float16, groups=NUMERIC_CHECKS))
    failed = {(row.stage, row.check.split(" of ")[0]) for row in rows if row.failed}
    assert ("RoPE", "full_attention float16") in failed and ("KV cache", "K") in failed


@pytest.mark.numerics
@pytest.mark.parametrize("fault", ["layer-scalar-missing", "attention-scaled-by-head-dim", "k-norm-weight-dropped"])
def test_a_porting_bug_flips_decided_bf16_tokens(tiny_model, fault, report):
    """The token rule lets no real flip through: these catalogued bugs carry some bf16 top-1 tokens
    past float64 gaps wider than the profile's bound (3.25 logits), and those rows fail; the
    fault-free run decides the same rows and agrees on all (``test_tiny_profiles_pass_their_gates``)."""
    with faults_named([fault])[0].injected():
        rows = run_verification(tiny_model, VerifyOptions(dtype=torch.bfloat16, groups=("layers", "decode")))
    flips = [row for row in rows if row.metric == "top-1 disagreements" and row.failed]
    assert flips, [format_row(row) for row in rows if row.metric == "top-1 disagreements"]
    report(f"bf16 {fault}: " + "; ".join(f"{row.stage} {row.value:g} ({row.check})" for row in flips))


def test_fp16_finfo_min_makes_no_nan_but_is_flagged(tiny_model):
    """With finfo(fp16).min the torch backend stays finite (its SDPA adds the mask in fp32). The
    mask-value row is exact about fp16 arithmetic: min - score rounds back to min while the score
    bound is below 16 (half an fp16 ulp at 65504; the tiny model's bound is 11.5), and overflows
    to -inf beyond (q norms x 4: bound 46), where an fp16 adder would make a fully masked (padded)
    row NaN."""
    fill = torch.finfo(torch.float16).min
    for model, overflows in ((tiny_model, 0), (made_models.steep(tiny_model), 1)):
        rows = run_verification(model, VerifyOptions(dtype=torch.float16, groups=("mask-value",), mask_value=fill))
        assert [row.value for row in rows] == [0.0, overflows]
        half = copy.deepcopy(model).to(torch.float16)
        prompt = text_prompt(half.config, [9, 1], seed=2)  # row 1: one token, the rest padding
        runtime = StaticGemma4Runtime(half, max_seq=16, batch_size=2, mask_value=fill)
        inputs = runtime.build_inputs(prompt.input_ids, prompt.attention_mask)
        outputs = runtime.prefill_outputs(inputs, keep_intermediates=True)
        assert all(torch.isfinite(state).all() for state in outputs.hidden_states)
        assert torch.isfinite(runtime.decode_one(torch.tensor([[7], [8]]))).all()


@given(
    lengths=st.lists(st.integers(1, 20), min_size=1, max_size=3),
    dtype=st.sampled_from(PROFILES),
    steps=st.integers(1, 3),
)
@example(lengths=[1, 1, 20], dtype=torch.float16, steps=3)  # rows that are almost all padding
@example(lengths=[20], dtype=torch.bfloat16, steps=1)  # no padding
def test_no_nan_or_inf_for_the_default_mask_value(tiny_low_precision, lengths, dtype, steps):
    model = tiny_low_precision[dtype]
    event("a row of one token" if min(lengths) == 1 else "every row longer than one token")
    event("mostly padding" if min(lengths) <= 20 // 4 else "little padding")
    runtime = StaticGemma4Runtime(model, max_seq=24, batch_size=len(lengths))
    prompt = text_prompt(model.config, lengths, seed=len(lengths))
    inputs = runtime.build_inputs(prompt.input_ids, prompt.attention_mask)
    outputs = runtime.prefill_outputs(inputs, keep_intermediates=True)
    produced = [*outputs.hidden_states, outputs.per_layer_inputs, outputs.logits, *runtime.cache.keys.values()]
    for _ in range(steps):
        produced.append(runtime.decode_one(torch.full((len(lengths), 1), 9)))
    assert all(torch.isfinite(tensor).all() for tensor in produced)


def test_overflow_report_names_the_first_overflowing_layer(tiny_model, monkeypatch, capsys):
    """Layer 3's up projection scaled by 1e6: in fp16 its output leaves the range first; verify
    names it (and, downstream, everything after it fails too)."""
    model = made_models.overflowing(tiny_model)
    monkeypatch.setattr(models, "build_default_model", lambda name, **_: model)
    later = ("decode", "long-positions", "schedules")  # groups past the overflow: not this test's subject
    args = ["verify", "--dtype", "float16", "--no-export", *(part for group in later for part in ("--without", group))]
    assert cli.main(args) == 1
    printed = capsys.readouterr().out
    assert "verify: first overflow in float16: layer 3 [first: layer 3 up_proj, headroom" in printed
    rows = run_verification(model, VerifyOptions(dtype=torch.float16, groups=("overflow",)))
    failed = [row for row in rows if row.failed]
    assert failed[0].check.startswith("layer 3 [first: layer 3 up_proj")
    print(format_row(failed[0]))


def test_metric_formulas_on_known_values():
    reference = torch.tensor([1.0, -1.0, 2.0, 0.0])
    noisy = reference + torch.tensor([0.1, 0.0, -0.1, 0.0])
    metrics = measure(noisy, reference)
    assert metrics.max_abs == pytest.approx(0.1)
    assert metrics.peir == pytest.approx(0.1 / 3)
    assert metrics.sqnr_db == pytest.approx(10 * torch.log10(torch.tensor(6.0 / 0.02)).item())
    assert measure(reference, reference).sqnr_db == float("inf")
    assert measure(-reference, reference).cosine == pytest.approx(-1.0)
    assert measure(torch.tensor([float("nan"), 0, 0, 0]), reference).sqnr_db != measure(reference, reference).sqnr_db
    constant = torch.full((4,), 3.0)  # no interval: no error is a PEIR of 0, any error an infinite one
    assert measure(constant, constant).peir == 0.0 and measure(constant + 0.5, constant).peir == math.inf
    zeros, empty = torch.zeros(3), torch.zeros(0)  # no norm: equal is a cosine of 1, no elements no error
    assert measure(zeros, zeros).cosine == 1.0 and measure(empty, empty).max_abs == 0.0
    with pytest.raises(ValueError, match=r"^ours has shape \(4, 1\), the reference \(4,\)$"):
        measure(reference[:, None], reference)  # not broadcast: a silent (4, 4) comparison
    logits = torch.tensor([[0.0, 3.0, 1.0, 2.0, 5.0, 4.0], [9.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    other = torch.tensor([[0.0, 3.0, 1.0, 2.0, 4.0, 5.0], [9.0, 0.0, 0.0, 0.0, 0.0, 1.0]])
    assert top_k_check(other, logits, 1, bound=0.5).missed == 1  # row 0's gap 1 is decided, row 1 agrees
    assert matched_prefix(torch.tensor([[1, 2, 3], [1, 2, 4]]), torch.tensor([[1, 2, 3], [1, 5, 4]])) == 1
    with pytest.raises(ValueError, match=r"^ours has shape \(1, 2\), the reference \(1, 3\)$"):
        matched_prefix(torch.tensor([[1, 2]]), torch.tensor([[1, 2, 3]]))  # a short generation: no prefix read


def test_overflow_hooks_stay_out_of_export_tracing(tiny_model):
    """The ExecuTorch backend lowers a stage on first use, inside the report's recording block:
    the hooks must skip traced (fake) values instead of reading them (a data-dependent error)."""
    runtime = StaticGemma4Runtime(tiny_model, max_seq=8)
    head = runtime.modules.lm_head
    ranges: dict[str, float] = {}
    with recorded_ranges(runtime, ranges):
        torch.export.export(head, head.example_inputs(1, 1, torch.Generator().manual_seed(0)), strict=False)
        assert ranges == {}
        head(torch.ones(1, 1, 64))
    assert ranges == {"lm_head": pytest.approx(float(head(torch.ones(1, 1, 64)).abs().max()))}


@pytest.mark.numerics
def test_the_schedules_grid_in_low_precision_is_gated_against_float64(tiny_model, report):
    """The schedules grid in bfloat16: every prompt length's schedules against HF in float64 under the
    profile's gate, HF's own bf16 figure beside; a port fault that shows only at an uneven chunk
    schedule (masks of a chunk one position early) falls far below the gate there, and the row names
    the schedule and the first position below it."""
    options = VerifyOptions(dtype=torch.bfloat16, groups=("schedules",))
    clean = run_verification(tiny_model, options)
    assert_rows_pass(clean)
    gated = [row for row in clean if row.metric == "SQNR dB"]
    assert len(gated) == 8 and all(row.tolerance == GATES[torch.bfloat16].sqnr_db for row in gated)
    port = "gemma4_static.oracle.faults.port_faults:ChunkMaskOffset"
    faulty = run_verification(tiny_model, dataclasses.replace(options, port=port))
    failed = [row for row in faulty if row.failed]
    assert failed and "[first: uneven mix [1, 4]: position 4 (chunk end)" in failed[0].check
    report(
        f"bf16 grid: clean worst {min(row.value for row in gated):.1f} dB; "
        f"chunk-mask fault {failed[0].value:.1f} dB (gate {failed[0].tolerance:g}) at {failed[0].check}"
    )
