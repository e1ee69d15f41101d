"""Kernel sets (``gemma4-static kernels``, ``verify --kernel-set``): listed with whether this CPU
runs each, printed as a CI environment, refused with the reason where the CPU lacks a flag, and a
process started under a set that does not run its kernels stops instead of measuring the wrong ones."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

from gemma4_static.commands import cli
from gemma4_static.oracle.numerics import kernel_sets
from gemma4_static.oracle.numerics.kernel_sets import KERNEL_SETS, MARKER, check_active, kernel_set_named
from tests.paths import ROOT


def test_kernels_lists_every_set_with_its_status(capsys, monkeypatch):
    """On a CPU with AVX2 and no AVX-512: each set's line says whether it runs here, or what it lacks."""
    flags = {"sse4_1": True, "avx2": True, "fma3": True, "cpu_name": "test"}
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: flags)
    assert cli.main(["kernels"]) == 0
    printed = capsys.readouterr().out.splitlines()
    status = dict.fromkeys(("native", "avx2", "baseline"), "runs here") | {
        "avx512": "kernel set avx512 needs CPU flags ['avx512_f', 'avx512_bw', 'avx512_vl', 'avx512_dq'], which this"
        " test lacks"
    }
    assert printed == [f"{name:<9} {status[name]}: {kernel_set.about}" for name, kernel_set in KERNEL_SETS.items()]


def test_kernels_env_prints_the_variables_of_a_set(capsys, monkeypatch):
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: {"avx2": True, "fma3": True, "cpu_name": "test"})
    assert cli.main(["kernels", "--env", "avx2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "ATEN_CPU_CAPABILITY=avx2",
        "ONEDNN_MAX_CPU_ISA=AVX2",
        "MKL_ENABLE_INSTRUCTIONS=AVX2",
        f"{MARKER}=avx2",
    ]


def test_a_set_the_cpu_lacks_is_refused_with_the_missing_flags(capsys, monkeypatch):
    monkeypatch.delenv(MARKER, raising=False)  # the suite may itself run under that set
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: {"avx2": True, "fma3": True, "cpu_name": "test"})
    assert cli.main(["kernels", "--env", "avx512"]) == 1
    assert "kernel set avx512 needs CPU flags ['avx512_f', 'avx512_bw', 'avx512_vl', 'avx512_dq']" in (
        capsys.readouterr().err
    )
    assert cli.main(["verify", "--kernel-set", "avx512"]) == 2
    assert "needs CPU flags" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["kernels", "--env", "avx3"], ["verify", "--kernel-set", "AVX2"]])
def test_unknown_sets_are_a_clear_error(argv, capsys):
    assert cli.main(argv) == 2
    assert "kernel set must be one of ['native', 'avx2', 'avx512', 'baseline'], got" in capsys.readouterr().err


def test_a_process_that_does_not_run_its_set_says_so(monkeypatch):
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "DEFAULT")
    with pytest.raises(ValueError, match="kernel set avx2 should run ATen AVX2, but this process runs DEFAULT"):
        check_active("avx2")
    check_active("native")  # native runs whatever the CPU has


def test_verify_under_the_set_it_already_runs_stays_in_process(monkeypatch):
    """The re-run is skipped once the marker names the set (no endless re-execution)."""
    monkeypatch.setenv(MARKER, "native")
    monkeypatch.setattr(kernel_sets.subprocess, "run", lambda *args, **kwargs: pytest.fail("re-ran"))
    assert kernel_sets.rerun_under("native", ["verify"]) is None


def test_verify_under_another_set_reruns_the_command_in_a_process_under_it(monkeypatch):
    """The same command line, ``python -m gemma4_static``, with the set's variables and its marker;
    the child's exit code is the answer."""
    monkeypatch.delenv(MARKER, raising=False)
    ran = []
    monkeypatch.setattr(
        kernel_sets.subprocess, "run", lambda argv, env: ran.append((argv, env)) or SimpleNamespace(returncode=3)
    )
    assert kernel_sets.rerun_under("native", ["verify", "--dtype", "bfloat16"]) == 3
    ((argv, env),) = ran
    assert argv == [sys.executable, "-m", "gemma4_static", "verify", "--dtype", "bfloat16"] and env[MARKER] == "native"


@pytest.mark.kernels
def test_a_test_run_started_under_a_set_it_does_not_run_stops():
    """The suite refuses to measure under other kernels than its environment names (the kernels
    lane's guard, so it runs in that lane: a new pytest process)."""
    wrong = {**kernel_set_named("avx2").environment(), "ATEN_CPU_CAPABILITY": "default"}
    wrong = {key: value for key, value in wrong.items() if not key.startswith("PYTEST_XDIST")}
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0", "--collect-only", "-q"]
    result = subprocess.run(
        [*command, "tests/unit/oracle/numerics/test_token_rule.py"], cwd=ROOT, env=wrong, capture_output=True, text=True
    )
    assert result.returncode == 4, result.stdout + result.stderr
    assert "kernel set avx2 should run ATen AVX2, but this process runs DEFAULT" in result.stderr


def test_what_a_process_runs_is_named_with_its_thread_count(monkeypatch):
    monkeypatch.setenv(MARKER, "avx2")
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    assert kernel_sets.active_kernels() == "kernel set avx2, ATen AVX2, 1 thread"
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    monkeypatch.delenv(MARKER)
    assert kernel_sets.active_kernels() == "ATen AVX2, 2 threads"
