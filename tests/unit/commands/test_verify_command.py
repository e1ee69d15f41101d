"""The verify command end to end: exit codes, the JSON report, a corrupted stage, bad arguments."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import torch

from gemma4_static.commands import cli
from gemma4_static.commands import export as export_command
from gemma4_static.commands import verify as verify_command
from gemma4_static.cpu import vision as cpu_vision
from gemma4_static.cpu.rope import build_rope
from gemma4_static.oracle.groups import names
from gemma4_static.oracle.options import VerifyOptions
from gemma4_static.oracle.references import models
from gemma4_static.ports import Gemma4Port, ImageLimits, ImageProfile, PortLimits
from gemma4_static.ports import static as static_port
from tests.reports import read_report

pytestmark = [
    pytest.mark.usefixtures(
        "reuse_session_models",  # the command gets the session's models
        "hf_answers_kept",  # and asks HF each question once (the runs on the same model share it)
    ),
    pytest.mark.xdist_group("verify-tiny"),  # on one worker with the group pairs: HF's answers are a worker's
]


def test_verify_passes_on_the_default_model_and_writes_json(tmp_path, capsys):
    """Every group but export (``--no-export``: its graphs exported from this model and passing are
    its pair's correct run in ``test_group_pairs``, which this run would repeat for 4.5 s)."""
    report_path, page_path = tmp_path / "report.json", tmp_path / "report.html"
    argv = ["verify", "--no-export", "--schedules-budget", "150", "--json", str(report_path), "--html", str(page_path)]
    assert cli.main(argv) == 0  # the grid: its own tests
    printed = capsys.readouterr().out
    assert "FAIL  " not in printed and printed.rstrip().splitlines()[-2].startswith("verify: ")
    report = read_report(report_path)
    page = page_path.read_text()
    for status, count in report["counts"].items():  # the page holds the JSON's rows (the browser lane renders it)
        assert len(re.findall(rf'<tr id="[^"]+" data-status="{status}"', page)) == count
    outcomes = {cell["outcome"] for cell in report["figures"]["grid"]}
    assert len(report["figures"]["layers"]) == 10 and outcomes == {"pass", "over budget"}  # a budget of 150 calls
    assert report["model"] == "tiny" and report["passed"] is True
    assert report["metadata"]["options"]["groups"] == sorted(name for name in names() if name != "export")
    spans = [row["check"].split()[1] for row in report["rows"] if row["check"].startswith("layers ")]
    covered = [layer for span in spans for layer in range(int(span.split("-")[0]), int(span.split("-")[1]) + 1)]
    assert covered == list(range(10)), spans  # the hidden states merged per span: every layer once, in order
    vision = [row["check"] for row in report["rows"] if row["stage"] == "vision prefill"]
    sub_stages = ["patch embeddings", "encoder layers 0-1 hidden states", "pooled (pooling matrix)"]
    assert vision[:4] == [*sub_stages, "soft tokens (stage) vs get_image_features"], vision  # each sub-stage once
    assert "soft tokens in prefill vs get_image_features" in vision
    stages = {row["stage"] for row in report["rows"]}
    assert stages == {
        "static inputs",
        "token embedding",
        "PLE",
        "vision inputs",
        "vision prefill",
        "fusion",
        "masks prefill",
        "masks decode",
        "masks chunk",
        "masks vision",
        "RoPE",
        "RoPE decode",
        "mask value",
        "decoder layers",
        "KV cache",
        "prefill logits",
        "chunked prefill",
        "decode steps",
        "generation",
        "conversation",
        "schedules",
        "long positions",
        "overflow",
        "circle",  # one SKIP row: this runtime ships no Circle graphs of its own (--backend circle-stages runs them)
        "own-checks",  # one SKIP row: this runtime has no verification flow of its own beside the suite
    }
    for row in report["rows"]:
        assert set(row) == {
            "stage",
            "check",
            "metric",
            "value",
            "tolerance",
            "status",
            "detail",
            "higher_is_better",
            "hf",
            "skipped",
            "expected",
            "raised",
            "group",
        }
        if row["stage"] in SKIPPED_BY_THIS_RUNTIME:
            assert row["status"] == "SKIP" and SKIPPED_BY_THIS_RUNTIME[row["stage"]] in row["skipped"], row
            continue
        if row["status"] == "INFO":  # measured, not gated: ties counted, the matched prefix
            assert row["tolerance"] is None and row["value"] is not None
            continue
        within = row["value"] >= row["tolerance"] if row["higher_is_better"] else row["value"] <= row["tolerance"]
        assert row["status"] == "PASS" and within and row["detail"] == ""
    assert report["counts"]["PASS"] > 60 and report["counts"]["FAIL"] == 0 and report["counts"]["SKIP"] == 2


SKIPPED_BY_THIS_RUNTIME = {
    "own-checks": "a verification flow of its own",
    "circle": "does not expose its Circle graphs",
}


def test_rope_off_by_one_position_fails_its_rows(monkeypatch, capsys, tmp_path):
    def shifted(config, position_ids, *, dtype=torch.float32):
        return build_rope(config, position_ids + 1, dtype=dtype)

    monkeypatch.setattr(static_port, "build_rope", shifted)
    report_path = tmp_path / "report.json"
    assert cli.main(["verify", "--no-export", "--without", "schedules", "--json", str(report_path)]) == 1
    rows = read_report(report_path)["rows"]
    failed = {row["stage"] for row in rows if row["status"] == "FAIL"}
    assert failed == {"RoPE"}
    marked = [line for line in capsys.readouterr().out.splitlines() if line.endswith("<- first divergence")]
    assert len(marked) == 1 and marked[0].startswith("FAIL  RoPE")  # the first failing row, and only it


WITHOUT_LONG_CONTEXT = (
    "--without",
    "schedules",
    "--without",
    "long-positions",
)  # text-only, long: not these tests' subject
TOKEN_METRICS = ("margin shift (ulps)", "top-1 disagreements", "top-5 tokens missed", "tied at this precision")


@pytest.mark.numerics  # ~3.5 s each: the numerics lane, beside its E2B profiles
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_low_precision_profiles_report_metrics_against_float64(dtype, tmp_path):
    """The tiny model passes every gate of the profile (exit 0; the numerics lane runs them with
    more decode steps), and the report carries the metrics against float64 with HF's beside them."""
    report_path = tmp_path / "report.json"
    argv = ["verify", "--dtype", dtype, "--no-export", "--steps", "4", "--json", str(report_path)]
    assert cli.main(argv) == 0
    rows = read_report(report_path)["rows"]
    metrics = {row["metric"] for row in rows if row["stage"] == "prefill logits"}
    against_float64 = {"SQNR dB", "cosine", "max abs error", "PEIR", "smallest gap (ulps)", "non-finite values"}
    assert metrics == against_float64 | set(TOKEN_METRICS)
    sqnr = [row for row in rows if row["metric"] == "SQNR dB"]
    assert sqnr and all(row["higher_is_better"] and row["hf"] is not None for row in sqnr)
    assert {"mask value", "overflow", "generation"} <= {row["stage"] for row in rows}


def test_mask_value_option_reaches_the_runtime(tmp_path, capsys):
    assert cli.main(["verify", "--no-export", *WITHOUT_LONG_CONTEXT, "--without", "decode", "--mask-value", "-1"]) == 1
    assert "FAIL  mask value" in capsys.readouterr().out
    assert cli.main(["verify", "--no-export", "--mask-value", "2"]) == 2
    assert "mask_value must be negative" in capsys.readouterr().err


MOE = ["--config", "26b-a4b-geometry"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["verify", *MOE, "--dtype", "bfloat16"], "the bfloat16 profile of a mixture-of-experts model is not gated"),
        (["verify", *MOE, "--quant", "a8w8"], "the a8w8 profile of a mixture-of-experts model is not gated"),
        (["verify", *MOE, "--shard", "1/2"], "shard 1/2: a mixture-of-experts model's routing is judged over a whole"),
        (["fuzz", *MOE, "--quant", "a8w8"], "the a8w8 profile of a mixture-of-experts model is not gated"),
    ],
)
def test_what_a_moe_model_cannot_be_judged_in_is_refused_before_it_is_built(argv, message, monkeypatch, capsys):
    def never(*args, **kwargs):
        raise AssertionError("the model was built")

    monkeypatch.setattr(models, "build_default_model", never)
    assert cli.main(argv) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--quant", "a4w4"],
            "unknown base 'a4w4'; expected one of ['a16w8', 'a8w8', 'a16w4', '8da4w', '8da8w', 'a16w16t', 'a8w8t']",
        ),
        (["--quant", "a16w8+e8"], "quant scheme 'a16w8+e8' has no gates on backend 'torch'; gated: ['a16w8'"),
        (
            ["--quant", "a16w8", "--dtype", "bfloat16"],
            "quant runs over float32, not bfloat16",
        ),
        (["--quant", "8da4w+e8"], "quant scheme '8da4w+e8' has unknown or repeated options; expected some of +emb8"),
        (["--quant", "8da4w"], "quant scheme '8da4w' is dynamic (activations ranged per token at run time: a port's"),
        (
            ["--quant", "a16w8", "--port", "executorch-gemma4"],
            "port 'executorch-gemma4' runs the integer schemes "
            "['8da4w', '8da8w', '8da4w+emb8', '8da8w+emb8', 'a8w8'], not",
        ),
        (
            ["--quant", "8da4w", "--port", "qnn-gemma4"],
            "port 'qnn-gemma4' runs the integer schemes ['a16w8'], not '8da4w'",
        ),
        (
            ["--quant", "a16w8", "--backend", "executorch-stages"],
            "'a16w8' does not run on XNNPACK (no 16-bit activations",
        ),
        (["--quant", "a16w8", "--config", "26b-a4b-geometry"], "the a16w8 profile of a mixture-of-experts model"),
        (["--sensitivity"], "--sensitivity needs --quant SCHEME on backend torch"),
        (["--self-test", "--html", "r.html"], "--json and --html write a verification's report; --self-test prints"),
        (["--quant", "a8w8", "--sensitivity", "--backend", "executorch-stages"], "--sensitivity needs --quant SCHEME"),
    ],
)
def test_bad_integer_profiles_are_clear_errors(argv, message, capsys):
    assert cli.main(["verify", "--no-export", *argv]) == 2
    assert message in capsys.readouterr().err


def test_too_small_max_seq_is_a_clear_error(capsys):
    assert cli.main(["verify", "--max-seq", "8", "--no-export"]) == 2
    assert "max_seq must be at least" in capsys.readouterr().err


def test_missing_checkpoint_is_a_clear_error(tmp_path, capsys):
    missing = tmp_path / "no-such-checkpoint"
    assert cli.main(["verify", "--checkpoint", str(missing)]) == 2
    assert f"checkpoint path {str(missing)!r} is not a folder with a config.json" in capsys.readouterr().err


def test_non_gemma4_checkpoint_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    assert cli.main(["verify", "--checkpoint", str(tmp_path)]) == 2
    assert "has model_type='llama'; expected a Gemma 4" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [[], ["verify", "--config", "e4b"]])
def test_bad_arguments_exit_with_usage(argv):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2


def test_console_entry_point_runs_as_a_module():
    """``python -m gemma4_static`` reaches the command line (the verify flow runs in-process above)."""
    result = subprocess.run(
        [sys.executable, "-m", "gemma4_static", "verify", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("usage: gemma4-static verify") and "--self-test" in result.stdout


def test_verify_without_its_extra_says_what_to_install(monkeypatch, capsys):
    """Pillow comes with the ``verify`` extra, not with the runtime; without it the command says so.
    In-process: PIL made unimportable and the oracle and the command forgotten, so they are imported afresh."""
    monkeypatch.setitem(sys.modules, "PIL", None)
    import gemma4_static.commands.verify

    monkeypatch.setattr(gemma4_static, "oracle", gemma4_static.oracle)  # the fresh import rebinds them
    monkeypatch.setattr(gemma4_static.commands, "verify", gemma4_static.commands.verify)
    fresh = ("gemma4_static.oracle", "gemma4_static.commands.verify")
    for name in [name for name in sys.modules if name.startswith(fresh)]:
        monkeypatch.delitem(sys.modules, name)
    assert cli.main(["verify"]) == 2
    assert "PIL is missing; install the verify extra: pip install 'gemma4-static[verify]'" in capsys.readouterr().err


def test_vision_rope_off_by_one_position_fails_the_vision_rope_rows(monkeypatch, tmp_path):
    """The vision stage's 2-D RoPE is checked against HF's own rotary module: shifting it by one
    position fails exactly those rows (downstream, a shift of every position cancels out in q.k)."""
    original = cpu_vision.vision_rope
    monkeypatch.setattr(cpu_vision, "vision_rope", lambda spec, positions, dtype: original(spec, positions + 1, dtype))
    report_path = tmp_path / "report.json"
    assert cli.main(["verify", "--no-export", *WITHOUT_LONG_CONTEXT, "--json", str(report_path)]) == 1
    failed = {row["check"] for row in read_report(report_path)["rows"] if row["status"] == "FAIL"}
    assert failed == {"2-D RoPE cos vs Gemma4VisionRotaryEmbedding", "2-D RoPE sin vs Gemma4VisionRotaryEmbedding"}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["verify", "--steps", "-1"], "argument --steps: expected an integer in [1, 4096], got -1"),
        (["verify", "--max-seq", "99999999"], "argument --max-seq: expected an integer in [1, 8192], got 99999999"),
        (["verify", "--max-seq", "1e3"], "argument --max-seq: expected an integer in [1, 8192], got '1e3'"),
        (["verify", "--json", "/no/such/folder/r.json"], "argument --json: cannot write a report to"),
        (["verify", "--html", "/no/such/folder/r.html"], "argument --html: cannot write a report to"),
        (["compare", "a.json", "b.json", "--html", "/no/such/folder/c.html"], "argument --html: cannot write a report"),
        (["compare", "a.json", "b.json", "--threshold", "x"], "argument --threshold: invalid float value: 'x'"),
    ],
)
def test_bad_numbers_and_paths_are_one_line_usage_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err


def test_export_command_exports_the_configured_runtime(tmp_path, capsys, monkeypatch):
    """The command's wiring: a runtime of the named model at ``--max-seq``, the folder and the
    format reach ``export_stages`` (``pt2``, or ``pte --layout stages``) or ``export_bundle`` (``pte``, the
    runtime's own prefill length); tests/parity/test_export.py and test_bundle.py run them for real."""
    calls = []

    def export_stages(runtime, folder, *, format):
        calls.append((runtime.layout.max_seq, folder, format))
        return folder / "manifest.json"

    def export_bundle(runtime, folder):
        calls.append((runtime.layout.max_seq, folder, "bundle"))
        return folder / "manifest.json"

    monkeypatch.setattr(export_command, "export_stages", export_stages)
    monkeypatch.setattr(export_command, "export_bundle", export_bundle)
    assert cli.main(["export", str(tmp_path / "stages"), "--max-seq", "16", "--format", "pt2"]) == 0
    assert cli.main(["export", str(tmp_path / "pte"), "--max-seq", "16", "--format", "pte", "--layout", "stages"]) == 0
    assert cli.main(["export", str(tmp_path / "bundle"), "--max-seq", "48", "--format", "pte"]) == 0
    assert calls == [
        (16, tmp_path / "stages", "pt2"),
        (16, tmp_path / "pte", "pte"),
        (48, tmp_path / "bundle", "bundle"),
    ]
    assert f"manifest {tmp_path / 'stages' / 'manifest.json'}" in capsys.readouterr().out
    (tmp_path / "a-file").write_text("")
    assert cli.main(["export", str(tmp_path / "a-file")]) == 2
    assert "is not a folder" in capsys.readouterr().err


def test_an_interrupted_verify_writes_what_finished_marked_incomplete(tmp_path, monkeypatch):
    from gemma4_static.oracle.flow import verify as flow
    from gemma4_static.oracle.results.report import Row

    def interrupted(model, options, *, on_row):
        for row in (Row("masks prefill", "full", "mismatched entries", 0, 0, group="prefill-masks"),
                    Row("RoPE", "full", "max abs diff", 1.0, 2.5e-7, group="rope")):  # fmt: skip
            on_row(row)
        raise KeyboardInterrupt

    monkeypatch.setattr(flow, "verify", interrupted)
    report_path, page_path = tmp_path / "report.json", tmp_path / "report.html"
    with pytest.raises(KeyboardInterrupt):
        cli.main(["verify", "--json", str(report_path), "--html", str(page_path)])
    report = read_report(report_path)
    assert report["incomplete"].startswith("interrupted after 2 rows") and report["counts"]["FAIL"] == 1
    page = page_path.read_text()
    assert 'id="incomplete">incomplete: interrupted after 2 rows' in page and 'id="first-divergence"' in page


class ProfiledPort(Gemma4Port):
    """Needs an image in every prompt, in a fixed profile: no tiny model has one it takes."""

    name = "profiled"
    limits = PortLimits(
        images=ImageLimits(accepted=True, required=True, profiles=(ImageProfile("p", (48, 48), 16, 9),))
    )


def test_verify_takes_the_ports_own_default_model(monkeypatch, capsys):
    """Without ``--config``, a port that needs an image in a fixed profile is judged on the E2B
    multimodal model (the tiny ones hold no image it takes), any other on tiny."""
    from gemma4_static.oracle.references import models

    built = []

    def build(name, **kwargs):
        built.append(name)
        raise ValueError("built: stop here")

    monkeypatch.setattr(models, "build_default_model", build)
    assert cli.main(["verify", "--port", f"{__name__}:ProfiledPort"]) == 2
    assert cli.main(["verify"]) == 2
    assert built == ["e2b-multimodal", "tiny"] and "built: stop here" in capsys.readouterr().err
    assert models.default_models(ProfiledPort.limits) == models.PROFILE_MODELS == ("e2b-multimodal",)
    assert models.default_models(None) == models.DEFAULT_MODELS


def test_tico_is_judged_on_the_model_it_takes():
    pytest.importorskip("tico", reason="TICO's port needs the tico extra: pip install -e '.[tico]'")
    from gemma4_static.oracle.references.models import default_models
    from gemma4_static.ports.registry import declared_limits, port_factory

    assert default_models(declared_limits(port_factory("tico-gemma4")))[0] == "e2b-multimodal"


def test_a_run_passes_hfs_questions_to_an_outer_recording_only_where_answers_depend_on_them_alone(
    tiny_model, hf_answers_kept
):
    assert verify_command._outer(tiny_model, VerifyOptions()) is hf_answers_kept
    assert verify_command._outer(tiny_model, VerifyOptions(quant="a8w8")) is None  # its HF is calibrated in the run
