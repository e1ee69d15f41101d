"""The integer profile XNNPACK runs (``a8w8``: PT2E with ExecuTorch's XNNPACKQuantizer, see
``gemma4_static.executorch.xnnpack_quant``) on ExecuTorch in both forms, quantized stage programs and the one
program with its cache inside, against HF in float64 under its gates (``XNNPACK_GATES``), HF
quantized in a8w8 by this project's mechanics beside."""

from __future__ import annotations

import pytest

pytest.importorskip("executorch", reason="the executorch extra is not installed (pip install '.[executorch]')")

from gemma4_static.executorch.cache_program import ONE_PROGRAM
from gemma4_static.executorch.program_cache import lowered_programs
from gemma4_static.executorch.xnnpack_quant import QUANTIZED_STAGES
from gemma4_static.oracle.flow.verify import run_verification
from gemma4_static.oracle.options import VerifyOptions
from gemma4_static.oracle.results.report import assert_rows_pass
from gemma4_static.runtime import StaticGemma4Runtime

pytestmark = pytest.mark.executorch  # workers share lowered programs through the disk cache
# lowering quantized programs takes minutes: the stage form is checked at its prefill signatures
# (every stage, images included; its decode programs take the same observer states, verified by
# `verify --backend executorch-stages --quant a8w8`), the one program through prefill and decode
STAGE_CHECKS, PROGRAM_CHECKS = ("inputs", "layers"), ("layers", "decode")


@pytest.mark.nightly  # about 2.5 minutes of lowering with an empty cache
def test_a8w8_stage_programs_pass_their_gates(tiny_model, report):
    """Every stage of the image prompt's prefill as XNNPACK programs, the ones with projections
    quantized; each quantized program delegates to XNNPACK, its portable fallbacks reported per stage."""
    rows = run_verification(tiny_model, VerifyOptions(quant="a8w8", backend="executorch-stages", groups=STAGE_CHECKS))
    assert_rows_pass(rows)
    quantized = [(stage, program) for stage, is_quantized, program in lowered_programs() if is_quantized]
    quantized = [(stage, program) for stage, program in quantized if stage != ONE_PROGRAM]
    assert {stage for stage, _ in quantized} == set(QUANTIZED_STAGES)
    for stage, program in quantized:
        assert program.delegated >= 1, stage
    # int8 weights: a float program holds its layer's float32 projections, at least the smallest layer's
    # bytes; every quantized layer program is smaller than that (measured: 71-95 KB against 156 KB)
    layers = StaticGemma4Runtime(tiny_model, max_seq=8).modules.layers
    smallest = min(sum(4 * p.numel() for p in layer.parameters() if p.dim() == 2) for layer in layers)
    sizes = [len(program.buffer) for stage, program in quantized if stage == "DecoderLayer"]
    assert max(sizes) < smallest, (sizes, smallest)
    fallbacks = {
        stage: sorted({op for name, program in quantized if name == stage for op in program.portable}) or "none"
        for stage in QUANTIZED_STAGES
    }
    worst = min((row for row in rows if row.metric == "SQNR dB"), key=lambda row: row.value)
    report(
        f"a8w8 on XNNPACK: {len(quantized)} quantized programs ({min(sizes)}-{max(sizes)} bytes a layer, the "
        f"smallest layer's float32 weights {smallest}), portable fallbacks per stage {fallbacks}; worst "
        f"SQNR {worst.value:.1f} dB at {worst.stage} / {worst.check} (HF a8w8 {worst.hf:.1f})"
    )


@pytest.mark.nightly  # about 8 minutes of lowering with an empty cache
def test_a8w8_one_program_passes_its_gates(tiny_model, report):
    """The text model as one quantized program (prefill and decode methods calibrated on the recorded
    method inputs, decode taking prefill's observer states), the vision stage as a quantized stage
    program. Quantized for real: its logits sit at the scheme's noise against float64 (a float32
    program lands near 130 dB there)."""
    rows = run_verification(tiny_model, VerifyOptions(quant="a8w8", backend="executorch", groups=PROGRAM_CHECKS))
    assert_rows_pass(rows)
    sizes = [
        len(program.buffer) for label, quantized, program in lowered_programs() if quantized and label == ONE_PROGRAM
    ]
    assert sizes, "no quantized program was lowered"
    logits = [row for row in rows if row.stage in ("prefill logits", "decode steps") and row.metric == "SQNR dB"]
    assert logits and max(row.value for row in logits) < 40, [row.value for row in logits]
    worst = min((row for row in rows if row.metric == "SQNR dB"), key=lambda row: row.value)
    report(
        f"a8w8 one program on XNNPACK: {len(sizes)} programs of {sorted(sizes)} bytes; worst SQNR "
        f"{worst.value:.1f} dB at {worst.stage} / {worst.check} (HF a8w8 {worst.hf:.1f})"
    )
