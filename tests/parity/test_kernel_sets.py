"""The low-precision gates under every kernel set this CPU can run (``gemma4-static kernels``):
``verify`` in the dtype whose kernels the set changes and (nightly) the numerics lane on the default
model (both dtypes), in new processes started under each set, since the kernels are chosen at process
start. A set the CPU lacks is skipped with the flag it misses. The whole numerics lane under each set,
the E2B geometry's profiles included (seven times the tiny model's time: 350 s of the 450 s the
no-vector set took), is CI's kernel-set matrix's on every pull request, one job per set."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.paths import ROOT

# AVX-512 without bf16 instructions emulates bf16; AVX2 has no avx512_fp16; the others: either
VERIFY_DTYPE = {"native": "bfloat16", "avx512": "bfloat16", "avx2": "float16", "baseline": "float16"}

pytestmark = pytest.mark.kernels


def _run(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)


def _plain(env: dict[str, str]) -> dict[str, str]:
    """``env`` for a plain process beside this one: not an xdist worker, one intra-op thread (as
    each worker has: two processes spinning two OpenMP threads each on two cores run many times
    slower). Two threads are covered by CI's kernel-set matrix, which runs one process a job."""
    return {**{key: value for key, value in env.items() if not key.startswith("PYTEST_XDIST")}, "OMP_NUM_THREADS": "1"}


@pytest.mark.nightly  # ~40 s a set; on every pull request CI's kernel-set matrix runs the lane under each set
def test_numerics_lane_passes_under_the_kernel_set(kernel_set, report):
    env = _plain(kernel_set.environment())
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "0", "--gemma4-numerics"]
    lane = _run([*command, "-k", "not e2b_geometry", "tests/parity/test_numerics.py"], env)
    summary = lane.stdout.strip().splitlines()[-1] if lane.stdout.strip() else lane.stderr[-2000:]
    assert lane.returncode == 0, lane.stdout[-4000:] + lane.stderr[-2000:]
    assert "failed" not in summary and "passed" in summary
    report(f"{kernel_set.name}: numerics lane {summary}")


def test_verify_passes_under_the_kernel_set(kernel_set, report):
    """``verify --kernel-set NAME`` in the dtype whose kernels the set changes (both dtypes under every
    set are CI's kernel-set matrix's, and the numerics lane above runs both here)."""
    dtype = VERIFY_DTYPE[kernel_set.name]
    env = _plain(dict(os.environ))
    verify = [sys.executable, "-m", "gemma4_static", "verify", "--dtype", dtype, "--no-export"]
    result = _run([*verify, "--kernel-set", kernel_set.name], env)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    header, summary = result.stdout.splitlines()[0], result.stdout.strip().splitlines()[-1]
    aten = kernel_set.aten or ""
    assert f"kernel set {kernel_set.name}, ATen {aten}" in header, header
    report(f"{kernel_set.name} {dtype}: {summary}")
