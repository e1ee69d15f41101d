"""The integer profiles (``verify --quant``) against HF in float64, gated per scheme and stage
(``oracle/numerics/gates.py``), HF quantized in the same scheme beside; catalogued porting bugs
fail the a16w8 gates; the sensitivity sweep ranks the groups and draws its chart."""

from __future__ import annotations

import pytest
from PIL import Image, ImageStat

from gemma4_static.commands import cli
from gemma4_static.oracle.faults.catalogue import faults_named
from gemma4_static.oracle.faults.self_test import run_fault
from gemma4_static.oracle.flow.sensitivity import run_sensitivity
from gemma4_static.oracle.flow.verify import run_verification
from gemma4_static.oracle.numerics.sensitivity_report import as_json
from gemma4_static.oracle.options import VerifyOptions
from gemma4_static.oracle.results.report import assert_rows_pass, format_row
from gemma4_static.quant import SCHEMES
from tests.reports import read_report

# every check group of a profile run that depends on the numbers (masks are checked exactly in fp32), and
# every site of the profile against the torchao reference
NUMERIC_CHECKS = ("quantization", "inputs", "mask-value", "layers", "chunked-prefill", "decode", "overflow")
GATED = ("SQNR dB", "cosine", "SQNR below HF's (dB)", "margin shift (logits)")  # the rows a gate decides


def _gated(model, scheme: str, report, label: str) -> list:
    rows = run_verification(model, VerifyOptions(quant=scheme, groups=NUMERIC_CHECKS))
    sqnr = [row for row in rows if row.metric == "SQNR dB"]
    assert sqnr and all(row.hf is not None for row in sqnr), "HF in the same scheme is beside every gated row"
    worst = min(sqnr, key=lambda row: row.value - row.tolerance)
    report(
        f"{label} {scheme}: narrowest SQNR margin {worst.value - worst.tolerance:.1f} dB at {worst.stage} / "
        f"{worst.check} ({worst.value:.1f} dB, gate {worst.tolerance:g}, HF {worst.hf:.1f})"
    )
    return rows


@pytest.mark.numerics  # ~3 s: the numerics lane holds the integer profiles
def test_a16w8_passes_its_gates_on_the_default_model(tiny_model, report):
    assert_rows_pass(_gated(tiny_model, "a16w8", report, "tiny"))


@pytest.mark.numerics
@pytest.mark.parametrize("scheme", SCHEMES[1:])
def test_tiny_schemes_pass_their_gates(tiny_model, scheme, report):
    assert_rows_pass(_gated(tiny_model, scheme, report, "tiny"))


@pytest.mark.numerics
@pytest.mark.nightly  # ~38 s each; CI's nightly job and the numerics lane of its kernel-set matrix run them
# a16w8's sites are a16w8+e8+h8's without the tables and the LM head: the E2B geometry runs the
# latter (and each other base); tiny runs all six schemes on every run
@pytest.mark.parametrize("scheme", ("a8w8", "a16w4", "a16w8+e8+h8"))
def test_e2b_geometry_schemes_pass_their_gates(e2b_model, scheme, report):
    assert_rows_pass(_gated(e2b_model, scheme, report, "e2b-geometry"))


@pytest.mark.numerics
@pytest.mark.parametrize(
    "fault",
    [
        "sliding-window-ignored",
        "image-tokens-causal",
        "shared-kv-first-producer",
        "final-softcap-missing",
        "layer-scalar-missing",
        "attention-scaled-by-head-dim",
        "embedding-unscaled",
        "vision-clamps-dropped",
    ],
)
def test_a_porting_bug_fails_the_a16w8_gates(tiny_model, fault, report):
    """Not lost in the a16w8 noise: the bug drives a stage past a gate (SQNR, cosine, the deficit against
    HF in a16w8 or the margin shift; the fault-free run passes them:
    ``test_a16w8_passes_its_gates_on_the_default_model``). The ``quantization`` group is left out: a
    bug upstream of a matmul moves its input's range away from HF's, which that group reports first
    (``layer 0 o_proj``: HF's values 38,690 steps outside, for ``sliding-window-ignored``)."""
    gated_groups = tuple(check for check in NUMERIC_CHECKS if check != "quantization")
    result = run_fault(faults_named([fault])[0], tiny_model, VerifyOptions(groups=gated_groups, quant="a16w8"))
    gated = [row for row in result.failed if row.metric in GATED]
    assert gated, result.error or [format_row(row) for row in result.failed]
    first = gated[0]
    report(f"a16w8 {fault}: {first.stage} / {first.check} {first.metric} {first.value:.3g} (gate {first.tolerance:g})")


@pytest.mark.numerics  # the sensitivity sweep with its chart, ~6 s: the numerics lane
def test_sensitivity_table_json_and_chart(tmp_path, capsys):
    """``--sensitivity`` prints the ranked table, adds it to the JSON and writes a readable PNG beside it."""
    report_path = tmp_path / "report.json"
    argv = ["verify", "--quant", "a16w8", "--sensitivity", "--json", str(report_path), "--no-export"]
    assert cli.main([*argv, "--without", "rope", "--without", "chunked-prefill", "--without", "decode"]) == 0
    out = capsys.readouterr().out
    assert "only: one group quantized, the rest float (ranked by KL)" in out and "every group quantized but one" in out
    section = read_report(report_path)["sensitivity"]
    only, all_but = section["ranked"]["only"], section["ranked"]["all but"]
    groups = {result["group"] for result in only}
    assert groups == {result["group"] for result in all_but} and {"PLE", "vision", "layer 0", "q_proj"} <= groups
    assert "LM head" not in groups  # a16w8 keeps the LM head in float (+h8 quantizes it)
    kl = [result["kl_mean"] for result in only]
    assert kl == sorted(kl, reverse=True) and kl[0] > 0
    assert section["baseline"]["kl_mean"] > kl[-1]
    chart = tmp_path / "report.sensitivity.png"
    assert section["chart"] == str(chart) and chart.stat().st_size > 10_000
    with Image.open(chart) as image:
        assert image.format == "PNG" and image.size[0] >= 1000 and image.size[1] >= 400
        spread = ImageStat.Stat(image.convert("L")).stddev[0]
    assert spread > 10, "the chart is blank"


@pytest.mark.numerics
def test_e2b_geometry_ple_path_against_a_middle_layer(e2b_model, report):
    """The E2B geometry under a16w8: the per-layer-embedding path and a middle decoder layer, each
    quantized alone and each left in float, measured at the logits (the sweep of these two groups;
    the whole sweep's ranking: the tiny model's chart test and ``verify --sensitivity``)."""
    middle = f"layer {len(e2b_model.config.layer_types) // 2}"
    sweep = run_sensitivity(e2b_model, VerifyOptions(quant="a16w8"), groups=("PLE", middle))
    figures = {}
    for mode in ("only", "all but"):
        ranked = [result.group for result in sweep.ranked(mode)]
        for group in ("PLE", middle):
            result = next(result for result in sweep.results if result.mode == mode and result.group == group)
            assert result.kl_mean > 0 and result.logits.sqnr_db > 0
            figures[mode, group] = result
            report(
                f"e2b-geometry a16w8 {mode} {group}: rank {ranked.index(group) + 1} of {len(ranked)}, logits KL "
                f"{result.kl_mean:.3g} nats, SQNR {result.logits.sqnr_db:.1f} dB, top-1 {result.top1_agreement:.1%}"
            )
    report(f"e2b-geometry a16w8 sweep: calibration {sweep.calibration_seconds:.1f} s, {sweep.sweep_seconds:.1f} s")


def test_a_sweep_of_an_unknown_group_is_refused(tiny_model):
    with pytest.raises(ValueError, match=r"groups has unknown names \['layer 99'\]; expected some of \['PLE'"):
        run_sensitivity(tiny_model, VerifyOptions(quant="a16w8"), groups=("PLE", "layer 99"))


def test_a_sweep_measures_each_group_at_its_own_output(tiny_model):
    """A cheap twin of the numerics lane's sweep (five groups of the tiny model, its tables and head
    quantized too): a layer's group at that layer's hidden states, the PLE's at the per-layer inputs,
    the vision tower's at the soft tokens, the token table's at the embeddings after fusion, a
    projection's (which every layer has) and the whole profile's at the last hidden states;
    each group quantized alone costs less KL than every group quantized and leaves its own output
    within 20 dB of float64 (a group measured at another output would not be); the JSON ranks them."""
    groups = ("q_proj", "layer 2", "PLE", "vision", "embedding")
    sweep = run_sensitivity(tiny_model, VerifyOptions(quant="a16w8+e8+h8"), groups=groups)
    last = "last hidden states (final norm)"
    assert sweep.baseline.output == last and sweep.baseline.mode == "all"
    outputs = {
        "q_proj": last,
        "layer 2": "layer 2 hidden states",
        "PLE": "per-layer inputs",
        "vision": "soft tokens",
        "embedding": "embeddings after fusion",
    }
    assert [(result.group, result.mode, result.output) for result in sweep.results] == [
        (group, mode, output) for mode in ("only", "all but") for group, output in outputs.items()
    ]
    only = sweep.ranked("only")
    assert all(0 < result.kl_mean < sweep.baseline.kl_mean and result.at_output.sqnr_db > 20 for result in only)
    ranked = as_json(sweep)["ranked"]
    assert list(ranked) == ["only", "all but"]
    for mode, results in ranked.items():
        assert [result["group"] for result in results] == [result.group for result in sweep.ranked(mode)]
        assert {result["mode"] for result in results} == {mode}
    assert set(ranked["only"][0]) == {
        "group", "mode", "output", "at_output", "logits", "top1_agreement", "kl_mean", "kl_max"
    }  # fmt: skip
    assert ranked["only"][0]["kl_mean"] == max(result.kl_mean for result in only)
