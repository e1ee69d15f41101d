"""``verify --self-test``: every catalogued porting bug injected in turn, one line per fault."""

from __future__ import annotations

import sys
import time
from typing import Any

from ..oracle.faults.catalogue import faults_named
from ..oracle.faults.self_test import format_result, run_self_test
from ..oracle.flow.verify import selected
from ..oracle.options import VerifyOptions


def self_test_command(
    model: Any, name: str, fault_names: list[str] | None, options: VerifyOptions, started: float
) -> int:
    """``verify --self-test``: prints a line per fault; exit 0 when the fault-free run passes and every
    applicable fault is caught, 1 otherwise."""
    faults = faults_named(fault_names)
    profile = options.quant or str(options.dtype).removeprefix("torch.")
    print(
        f"gemma4-static verify --self-test: {name} ({profile}, backend {options.backend}), {len(faults)} faults, "
        f"checks {', '.join(selected(options))}",
        flush=True,
    )
    baseline, results = run_self_test(
        model, options, faults=faults, on_result=lambda result: print(format_result(result), flush=True)
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
