"""The verdict: statuses (an infinite gate is INFO, never PASS), coverage, every exit code produced
by a cause of its own, strict JSON against the shipped schema, and the plugin failing a session
that compared nothing."""

from __future__ import annotations

import io
import logging
import math
from dataclasses import replace

import pytest

from gemma4_static.commands import cli
from gemma4_static.commands import verify as verify_command
from gemma4_static.oracle.checks import parity
from gemma4_static.oracle.flow.verify import MINIMUM
from gemma4_static.oracle.results.report import Row, explained, format_row, skip_row
from gemma4_static.oracle.results.verdict import ExitCode, Verdict
from tests.reports import read_report

pytestmark = pytest.mark.usefixtures("reuse_session_models")  # the command gets the session's models
ADAPTERS = "tests.unit.ports.port_adapters"


@pytest.mark.parametrize(
    ("row", "status"),
    [
        (Row("s", "c", "max abs diff", 1e-6, 2e-5), "PASS"),
        (Row("s", "c", "max abs diff", 3e-5, 2e-5), "FAIL"),
        (Row("s", "c", "max abs diff", math.nan, 2e-5), "FAIL"),
        (Row("s", "c", "ties", 3, math.inf), "INFO"),
        (Row("s", "c", "matched prefix", 15, -math.inf, higher_is_better=True), "INFO"),
        (Row("s", "c", "PEIR", math.nan, math.inf), "FAIL"),  # ungated, but not a number
        (Row("s", "c", "SQNR dB", math.inf, 30.0, higher_is_better=True), "PASS"),  # exact: infinitely good
        (skip_row("s", "c", "not exposed"), "SKIP"),
        (Row("s", "c", "errors", 1, 0, raised="Traceback ..."), "FAIL"),
    ],
)
def test_statuses(row, status):
    assert row.status == status
    assert row.compared == (status in ("PASS", "FAIL", "XFAIL") and not row.raised)  # a raise compared nothing


def test_a_documented_failure_is_xfail_and_only_a_failure_is():
    failing, passing = Row("s", "c", "m", 2.0, 1.0), Row("s", "c", "m", 0.5, 1.0)
    assert explained(failing, lambda row: "known upstream bug").status == "XFAIL"
    assert explained(failing, lambda row: None).status == "FAIL"
    assert explained(passing, lambda row: "known upstream bug").status == "PASS"
    assert "documented by the port: known upstream bug" in format_row(
        explained(failing, lambda row: "known upstream bug")
    )
    detailed = Row("s", "c", "m", 2.0, 1.0, detail="first: layer 3  ", raised="Traceback (most recent call last)")
    for row in (detailed, explained(detailed, lambda row: "known upstream bug")):  # a failure, documented or not
        assert format_row(row).splitlines()[-2:] == ["first: layer 3", "Traceback (most recent call last)"]
    assert format_row(explained(detailed, lambda row: None)).count("first: layer 3") == 1
    assert "first: layer 3" not in format_row(Row("s", "c", "m", 0.5, 1.0, detail="first: layer 3"))


def test_fail_is_painted_only_when_asked_and_no_color_is_honoured(monkeypatch):
    row = Row("s", "c", "m", 2.0, 1.0)
    assert "\033[1;31mFAIL" in format_row(row, colour=True) and "\033[" not in format_row(row)
    passing = Row("s", "c", "m", 0.5, 1.0)
    assert format_row(passing, colour=True) == format_row(passing)  # a PASS row is not painted

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert verify_command.colour_on(Terminal()) and not verify_command.colour_on(io.StringIO())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not verify_command.colour_on(Terminal())


def test_the_minimum_decides_green():
    logits = Row("prefill logits", "c", "m", 0.0, 1.0, group="layers")
    decode = Row("decode steps", "c", "m", 0.0, 1.0, group="decode")
    no_decode = replace(skip_row("decode steps", "decode", "no decode step"), group="decode")
    rope = Row("RoPE", "c", "m", 0.0, 1.0, group="rope")
    assert Verdict.of([logits, decode], minimum=MINIMUM).exit_code == ExitCode.PASSED
    assert Verdict.of([logits, no_decode, rope], minimum=MINIMUM).missing == ["decode steps"]
    assert Verdict.of([logits, no_decode, rope], minimum=MINIMUM).exit_code == ExitCode.NOTHING_COMPARED
    assert Verdict.of([replace(skip_row("a", "b", "c"), group="rope")], minimum=MINIMUM).missing == ["anything"]
    assert (
        Verdict.of([logits], minimum=MINIMUM).exit_code == ExitCode.PASSED
    )  # the decode group was left out of this run
    assert Verdict.of([logits, replace(decode, value=2.0)], minimum=MINIMUM).exit_code == ExitCode.FAILED
    raised = Row("decode steps", "c: the port raised", "errors", 1, 0, raised="Traceback", group="decode")
    assert Verdict.of([logits, raised], minimum=MINIMUM).exit_code == ExitCode.PORT_RAISED
    documented = Verdict.of(
        [logits, replace(raised, expected="documented")], minimum=MINIMUM
    )  # XFAIL, but nothing compared
    assert documented.exit_code == ExitCode.NOTHING_COMPARED and documented.missing == ["decode steps"]


def _verify(capsys, *argv: str, json_path=None) -> tuple[int, str, str, dict | None]:
    extra = ["--json", str(json_path)] if json_path is not None else []
    long_context = ["--without", "schedules", "--without", "long-positions"]  # each has its own tests
    code = cli.main(["verify", "--no-export", *long_context, *argv, *extra])
    out, err = capsys.readouterr()
    return code, out, err, read_report(json_path) if json_path is not None and json_path.exists() else None


def test_a_port_that_exposes_nothing_exits_5(capsys, tmp_path):
    code, out, _, report = _verify(capsys, "--port", f"{ADAPTERS}:NothingPort", json_path=tmp_path / "r.json")
    assert code == ExitCode.NOTHING_COMPARED == 5
    summary = out.rstrip().splitlines()[-1]
    assert "0 PASS, 0 FAIL, 0 XFAIL" in summary and "coverage: nothing compared" in summary, summary
    assert "verdict: nothing failed, but anything not compared (exit 5)" in summary
    assert report["passed"] is False and report["exit_code"] == 5 and report["counts"]["SKIP"] > 10


def test_a_logits_only_port_passes_with_its_coverage_stated(capsys, tmp_path):
    code, out, _, report = _verify(capsys, "--port", f"{ADAPTERS}:LogitsOnlyPort", json_path=tmp_path / "r.json")
    assert code == ExitCode.PASSED, out[-2000:]
    assert "coverage: logits only (0 of 10 layers): prefill logits, decode steps, generation, conversation" in out
    assert report["metadata"]["port"] == {"name": "logits only", "version": ""}


def test_a_function_factory_of_a_batch_1_port_is_built_as_batch_1(capsys):
    """The factory declares no limits: the suite builds the port for one unpadded row and reads the
    built port's limits (before, it took the defaults and asked for a padded batch of 2)."""
    code, out, err, _ = _verify(capsys, "--port", f"{ADAPTERS}:batch_one_port")
    assert code == ExitCode.PASSED, out[-2000:] + err[-2000:]
    assert "decode steps      1 rows x" in out


def test_a_port_raising_in_its_factory_exits_3_with_its_traceback(capsys):
    code, _, err, _ = _verify(capsys, "--port", f"{ADAPTERS}:raising_factory")
    assert code == ExitCode.PORT_RAISED == 3
    assert f"port '{ADAPTERS}:raising_factory' raised in its factory" in err
    assert "Traceback" in err and "in raising_factory" in err and "no such tensor" in err


def test_a_port_raising_in_a_stage_exits_3_with_its_traceback(capsys):
    code, out, _, _ = _verify(capsys, "--port", f"{ADAPTERS}:DecodeRaisesPort")
    assert code == ExitCode.PORT_RAISED
    assert "decode: the port raised" in out and "in _kernel" in out and "status 0x12" in out


def test_an_error_of_the_checks_themselves_exits_4(capsys, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("a bug in the checks")

    monkeypatch.setattr(parity, "compare", broken)
    code, _, err, _ = _verify(capsys, "--without", "rope")
    assert code == ExitCode.INTERNAL == 4
    assert "internal error of the suite" in err and "a bug in the checks" in err


def test_version_and_progress(capsys, monkeypatch):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--version"])
    assert exit_info.value.code == 0 and capsys.readouterr().out.startswith("gemma4-static ")

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    log = logging.getLogger("gemma4_static.oracle.session.port_under_test")
    for stream, quiet, shown in ((Terminal(), False, True), (Terminal(), True, False), (io.StringIO(), False, False)):
        monkeypatch.setattr("sys.stderr", stream)
        with cli.progress(quiet):
            log.info("building port x")
        assert ("building port x" in stream.getvalue()) == shown
    assert not logging.getLogger("gemma4_static").handlers


def test_the_plugin_fails_a_session_that_compared_nothing(pytester):
    result = pytester.runpytest_inprocess(
        "-p", "gemma4_static.pytest_plugin", "--gemma4-port", f"{ADAPTERS}:NothingPort", "--gemma4-model", "tiny"
    )
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED == 5
    result.stdout.fnmatch_lines(
        ["*gemma4: nothing compared for port*NothingPort on tiny: prefill logits and decode steps*"]
    )


def test_a_failures_detail_keeps_its_indentation_below_the_line():
    """A failure's detail (a mask diagram, a traceback) printed below its line as written: its
    indentation kept (a diagram's columns line up), trailing blanks dropped; a passing row prints one line."""
    diagram = "    q\\k 0 1\n      0 x .   \n"
    failing = Row("masks prefill", "full_attention", "max abs diff", 1.0, 0.0, detail=diagram, raised="  Traceback\n")
    lines = format_row(failing).splitlines()
    assert lines[0].startswith("FAIL  masks prefill") and lines[1:] == ["    q\\k 0 1", "      0 x .", "  Traceback"]
    passing = replace(failing, value=0.0, raised="")
    assert passing.status == "PASS" and "\n" not in format_row(passing)


def test_the_coverage_names_each_kinds_stages_in_data_flow_order_when_it_counts_the_stages():
    """Past ten stages the coverage counts them, then names the stages of each named kind it compared
    (those alone, in the rows' order); a stage of a kind that compared nothing is not named."""
    stages = [f"stage {index}" for index in range(8)] + ["masks decode", "vision inputs", "static inputs", "fusion"]
    rows = [Row(stage, "c", "max abs diff", 0.0, 1.0, group="g") for stage in stages]
    rows.append(Row("KV cache", "c", "max abs diff", math.nan, 1.0, skipped="not exposed", group="g"))
    named = {"host side": ("static inputs", "masks decode", "KV cache"), "images": ("fusion", "vision inputs")}
    verdict = Verdict.of(rows, num_layers=4, layers_compared=4, minimum={}, named=named)
    expected = "12 stages (host side: masks decode, static inputs) (images: vision inputs, fusion); 1 of 1 check groups"
    assert verdict.coverage() == f"4 of 4 layers, {expected}"
    ten = Verdict.of(rows[2:], num_layers=0, layers_compared=0, minimum={}, named=named)  # named, so not again
    assert ten.coverage() == f"{', '.join(stages[2:])}; 1 of 1 check groups"


def test_a_row_line_says_its_gate_or_that_it_has_none():
    """A gated row's line names its tolerance (or its floor, higher being better) and HF's own figure
    where it has one; an ungated row's says it is not gated."""
    lower = format_row(Row("decode steps", "c", "max abs diff", 1e-5, 2e-5))
    assert lower.endswith("max abs diff = 1e-05 (tolerance 2e-05)")
    higher = format_row(Row("layers", "c", "SQNR dB", 40.0, 31.0, higher_is_better=True, hf=42.5))
    assert higher.endswith("SQNR dB = 40 (HF 42.5; gate >= 31)")
    ungated = format_row(Row("generation", "c", "matched prefix", 15, -math.inf, higher_is_better=True))
    assert ungated.startswith("INFO ") and ungated.endswith("matched prefix = 15 (not gated)")
