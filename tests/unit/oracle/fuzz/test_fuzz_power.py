"""The power of the schedules grid and of the fuzzer, each on its own: every port-shaped fault
(:mod:`gemma4_static.oracle.faults.port_faults`) passes ``verify``'s fixed groups and fails both; the
unfaulted wrapper passes all three; a failure's reproduction script, run alone, fails the same way
(the self-test lane: ``--gemma4-self-test``). The fuzz command's exit codes and wiring run in the
default suite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gemma4_static.commands import cli
from gemma4_static.commands import fuzz as fuzz_command
from gemma4_static.oracle.faults.port_faults import FAULTY_PORTS, LONG_POSITION_FAULTS, MODULE, WrappedRuntimePort
from gemma4_static.oracle.flow.verify import verify
from gemma4_static.oracle.fuzz import FuzzResult, FuzzTarget, fuzz
from gemma4_static.oracle.groups import names
from gemma4_static.oracle.options import VerifyOptions
from gemma4_static.oracle.results.verdict import ExitCode

LONG_CONTEXT = ("schedules", "long-positions")  # the groups that run a port past its sample prompt's shapes
FIXED = tuple(name for name in names() if name not in LONG_CONTEXT)
EXAMPLES = 200  # each fault is found within 120 examples from seed 0 (benchmarks/fault_power.py)
CONTROL_EXAMPLES = 120  # the unfaulted wrapper: as many examples as the slowest fault needs


@pytest.mark.self_test
@pytest.mark.parametrize("port", [WrappedRuntimePort, *FAULTY_PORTS], ids=lambda port: port.__name__)
def test_a_port_shaped_fault_escapes_the_fixed_groups_and_not_the_grid_nor_the_fuzzer(
    port, tiny_model, tmp_path, report
):
    name, faulty = f"{MODULE}:{port.__name__}", port is not WrappedRuntimePort
    fixed = verify(tiny_model, VerifyOptions(port=name, groups=FIXED)).verdict
    assert fixed.exit_code == ExitCode.PASSED, fixed.summary()
    grid = [row for row in verify(tiny_model, VerifyOptions(port=name, groups=("schedules",))).rows if row.failed]
    assert bool(grid) == faulty, [row.check for row in grid]
    result = fuzz(
        FuzzTarget.of(tiny_model, VerifyOptions(port=name)),
        max_examples=EXAMPLES if faulty else CONTROL_EXAMPLES,
        seed=0,
        database=tmp_path,
        shrink=False,
    )
    assert (result.failure is not None) == faulty, result.failure
    found = "not found" if result.first_failure is None else "{} examples, {:.1f} s".format(*result.first_failure)
    report(f"{port.__name__}: fixed groups pass, grid {len(grid)} failing lengths, fuzzer {found}")


@pytest.mark.self_test
@pytest.mark.parametrize("port", [WrappedRuntimePort, *LONG_POSITION_FAULTS], ids=lambda port: port.__name__)
def test_a_long_position_fault_escapes_every_group_but_long_positions(port, tiny_model, report):
    """RoPE wrong only past 2048 positions inside the port, its ``rope`` hook exact: the RoPE rows,
    the sample prompt, the grid all pass; the long context's logits diverge where positions round.
    (The unfaulted wrapper passes every other group in the test above.)"""
    name, faulty = f"{MODULE}:{port.__name__}", port is not WrappedRuntimePort
    if faulty:
        others = tuple(group for group in names() if group != "long-positions")
        assert verify(tiny_model, VerifyOptions(port=name, groups=others)).verdict.exit_code == ExitCode.PASSED
    (row,) = verify(tiny_model, VerifyOptions(port=name, groups=("long-positions",))).rows
    assert row.compared and row.failed == faulty, row
    if faulty:
        position = int(row.check.split(" position ")[1].split(" ")[0])
        assert position > 2048, row.check  # float16 holds every integer up to 2048
    report(f"{port.__name__}: long positions {row.value:.3g} (tolerance {row.tolerance:.3g}) {row.check}")


@pytest.mark.self_test
def test_a_reproduction_run_alone_fails_the_same_way(tiny_model, tmp_path):
    target = FuzzTarget.of(tiny_model, VerifyOptions(port=f"{MODULE}:RingWrapCounter"))
    folders = {"database": tmp_path / "db", "reproduction": tmp_path / "repro"}
    result = fuzz(target, max_examples=EXAMPLES, seed=0, shrink=False, **folders)  # shrunk: gemma4-static fuzz
    assert result.failure is not None and result.reproduction is not None
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = subprocess.run(
        [sys.executable, str(result.reproduction)], cwd=elsewhere, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 1, run.stdout[-2000:] + run.stderr[-2000:]
    where = result.failure.split(" at ", 1)[1].split(" (")[0].split(":")[0]  # "row R position P" or "row R step S"
    assert f"DIVERGES at {where}" in run.stderr, (result.failure, run.stderr[-1000:])


def test_the_fuzz_command_reports_and_exits(capsys, monkeypatch, tmp_path):
    """Wiring and exit codes (the fuzzer itself runs above): a clean run exits 0, a divergence 1 with
    the reproduction named, a port whose factory raises 3, bad arguments 2."""
    argv = ["fuzz", "--max-examples", "2", "--database", str(tmp_path / "db"), "--reproduction", str(tmp_path)]
    assert cli.main([*argv, "--port", f"{MODULE}:WrappedRuntimePort"]) == ExitCode.PASSED
    assert "no divergence (exit 0)" in capsys.readouterr().out
    assert cli.main([*argv, "--port", "tests.unit.ports.port_adapters:raising_factory"]) == ExitCode.PORT_RAISED
    assert "raised in its factory" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["fuzz", "--max-examples", "0"])
    assert exit_info.value.code == ExitCode.USAGE
    capsys.readouterr()

    def diverging(target, **options):
        target.close()
        return fuzz_command_result(target.name)

    monkeypatch.setattr("gemma4_static.oracle.fuzz.fuzz", diverging)
    assert cli.main([*argv, "--port", f"{MODULE}:WrappedRuntimePort"]) == ExitCode.FAILED
    out = capsys.readouterr().out
    assert "divergence at example 3 after 1.5 s: logits leave HF's" in out and "reproduction" in out
    assert fuzz_command.DATABASE.parts[-1] == "gemma4-fuzz"


def fuzz_command_result(port: str) -> FuzzResult:
    failure = "logits leave HF's at row 0 position 9 (decode step 2): 3 > 0.0005"
    return FuzzResult(port, 4, 2.0, failure, (3, 1.5), Path("repro/reproduce.py"))


def test_the_plugin_fuzzes_a_port_in_shards(pytester, tmp_path):
    database = tmp_path / "db"
    result = pytester.runpytest_inprocess(
        "-p", "gemma4_static.pytest_plugin", "--gemma4-port", f"{MODULE}:WrappedRuntimePort",
        "--gemma4-model", "tiny", "--gemma4-fuzz", "3", "--gemma4-fuzz-database", str(database), "-k", "fuzz", "-v",
    )  # fmt: skip
    assert result.ret == 0
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*WrappedRuntimePort*tiny*fuzz-0*PASSED*"])
