"""``verify --self-test``: every catalogued porting bug injected in turn, one line per fault."""

from __future__ import annotations

import sys
import time
from typing import Any

import torch

from ..oracle.faults.catalogue import faults_named
from ..oracle.faults.self_test import format_result, run_self_test


def self_test_command(
    model: Any,
    name: str,
    fault_names: list[str] | None,
    checks: tuple[str, ...],
    dtype: torch.dtype,
    backend: str,
    started: float,
    *,
    quant: str | None = None,
) -> int:
    """``verify --self-test``: prints a line per fault; exit 0 when the fault-free run passes and every
    applicable fault is caught, 1 otherwise."""
    faults = faults_named(fault_names)
    profile = quant or str(dtype).removeprefix("torch.")
    print(
        f"gemma4-static verify --self-test: {name} ({profile}, backend {backend}), {len(faults)} faults, "
        f"checks {', '.join(checks)}",
        flush=True,
    )
    baseline, results = run_self_test(
        model,
        faults=faults,
        checks=checks,
        dtype=dtype,
        backend=backend,
        quant=quant,
        on_result=lambda result: print(format_result(result), flush=True),
    )
    broken = [row for row in baseline if row.failed]
    broken_checks = [result.fault.name for result in results if result.oracle_crashed]
    missed = [result.fault.name for result in results if not result.passed and not result.oracle_crashed]
    caught = sum(result.caught for result in results)
    elapsed = time.perf_counter() - started
    print(
        f"self-test: {caught} of {len(results)} faults caught, {len(missed) + len(broken_checks)} not ({elapsed:.1f} s)"
    )
    if broken:
        print(f"self-test: the fault-free run already fails {len(broken)} rows; fix those first", file=sys.stderr)
    if missed:
        print(f"self-test: no check catches {missed}", file=sys.stderr)
    if broken_checks:
        print(f"self-test: the checks themselves raised under {broken_checks}", file=sys.stderr)
    return 1 if broken or missed or broken_checks else 0
