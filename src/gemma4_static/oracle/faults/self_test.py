"""The self-test: the parity checks run once per catalogued fault (:mod:`.faults`) in data-flow order
until one catches it (the groups after the first failing one are not run), reporting which rows
caught it. A fault no check catches means the suite has a blind spot: the self-test fails."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ...executorch.cache_program import fresh_programs
from ..checks.report import Row
from ..flow.port_calls import raised_in
from ..flow.verify import CHECKS, run_verification
from .catalogue import CATALOGUE
from .faults import Fault


@dataclass(frozen=True)
class FaultResult:
    """What the checks made of one fault: the rows that failed (data-flow order, so the first is where
    it was first seen), or the error the runtime raised; ``not_applicable`` says why the fault cannot
    show (the model lacks the part it breaks, or the profile's precision cannot resolve it)."""

    fault: Fault
    failed: tuple[Row, ...] = ()
    error: str | None = None
    not_applicable: str | None = None  # why the fault cannot show here (no vision tower, below the precision)
    oracle_crashed: bool = False  # the checks themselves raised: nothing was caught, the oracle is broken

    @property
    def caught(self) -> bool:
        return (bool(self.failed) or self.error is not None) and not self.oracle_crashed

    @property
    def passed(self) -> bool:
        return self.caught or self.not_applicable is not None


def run_self_test(
    model: Any,
    *,
    faults: tuple[Fault, ...] = CATALOGUE,
    checks: tuple[str, ...] = tuple(CHECKS),
    dtype: torch.dtype = torch.float32,
    backend: str = "torch",
    quant: str | None = None,
    on_result: Callable[[FaultResult], None] = lambda result: None,
) -> tuple[list[Row], list[FaultResult]]:
    """The fault-free run's rows (all must pass for the results to mean anything), then one
    :class:`FaultResult` per fault, each from a fresh verification of ``model`` with ``checks`` in
    the profile ``dtype`` (a low-precision profile: its gates, so a fault must stand out of that
    precision's noise) on the runtime's ``backend``; with ``quant`` in that integer profile."""
    baseline = run_verification(model, dtype=dtype, export=False, checks=checks, backend=backend, quant=quant)
    results = []
    for fault in faults:
        reason = fault.not_applicable(model, dtype, quant)
        if reason is not None:
            result = FaultResult(fault, not_applicable=reason)
        else:
            result = run_fault(fault, model, checks, dtype, backend, quant)
        on_result(result)
        results.append(result)
    return baseline, results


def run_fault(
    fault: Fault,
    model: Any,
    checks: tuple[str, ...] = tuple(CHECKS),
    dtype: torch.dtype = torch.float32,
    backend: str = "torch",
    quant: str | None = None,
) -> FaultResult:
    """One verification of ``model`` in profile ``dtype`` on ``backend`` with ``fault`` injected, up to
    the first check group that fails (export left out: it replays the stages' own eager output, so it
    cannot see a fault). On ExecuTorch the
    programs are lowered afresh under the fault, and forgotten after it (a program lowered before
    would hide the fault; one lowered under it must not outlive it)."""
    with fault.injected(), fresh_programs(backend):
        try:
            options = {"dtype": dtype, "checks": checks, "backend": backend, "quant": quant}
            rows = run_verification(model, export=False, until_failure=True, **options)
        except Exception as error:  # a port that crashes is caught too, unless the crash is the oracle's
            where = raised_in(error)
            return FaultResult(
                fault, error=f"{type(error).__name__} in {where}: {error}", oracle_crashed=where == "oracle"
            )
    return FaultResult(fault, failed=tuple(row for row in rows if row.failed))


def format_result(result: FaultResult) -> str:
    """One line per fault: CAUGHT / MISSED / n/a, its name, and what caught it first."""
    name = result.fault.name
    if result.not_applicable is not None:
        return f"n/a     {name:<30} ({result.not_applicable})"
    if result.oracle_crashed:
        return f"BROKEN  {name:<30} the checks raised, not the runtime: {result.error[:100]}"
    if result.error is not None:
        return f"CAUGHT  {name:<30} raised {result.error[:100]}"
    if not result.failed:
        return f"MISSED  {name:<30} no check failed: {result.fault.bug}"
    first = result.failed[0]
    return f"CAUGHT  {name:<30} by {len(result.failed)} rows, first: {first.stage} / {first.check}"
