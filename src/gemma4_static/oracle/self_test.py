"""The self-test: every parity check run once per catalogued fault (:mod:`.faults`), reporting which
checks caught it. A fault no check catches means the suite has a blind spot: the self-test fails."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .catalogue import CATALOGUE
from .faults import Fault
from .report import Row
from .verify import CHECKS, run_verification


@dataclass(frozen=True)
class FaultResult:
    """What the checks made of one fault: the rows that failed (data-flow order, so the first is where
    it was first seen), or the error the runtime raised; ``applicable`` is False when the model lacks
    the part the fault breaks (e.g. a vision fault on a text-only model)."""

    fault: Fault
    failed: tuple[Row, ...] = ()
    error: str | None = None
    applicable: bool = True
    oracle_crashed: bool = False  # the checks themselves raised: nothing was caught, the oracle is broken

    @property
    def caught(self) -> bool:
        return (bool(self.failed) or self.error is not None) and not self.oracle_crashed

    @property
    def passed(self) -> bool:
        return self.caught or not self.applicable


def run_self_test(
    model: Any,
    *,
    faults: tuple[Fault, ...] = CATALOGUE,
    checks: tuple[str, ...] = tuple(CHECKS),
    on_result: Callable[[FaultResult], None] = lambda result: None,
) -> tuple[list[Row], list[FaultResult]]:
    """The fault-free run's rows (all must pass for the results to mean anything), then one
    :class:`FaultResult` per fault, each from a fresh verification of ``model`` with ``checks``."""
    baseline = run_verification(model, export=False, checks=checks)
    results = []
    for fault in faults:
        if fault.needs_vision and getattr(model.model, "vision_tower", None) is None:
            result = FaultResult(fault, applicable=False)
        else:
            result = run_fault(fault, model, checks)
        on_result(result)
        results.append(result)
    return baseline, results


def run_fault(fault: Fault, model: Any, checks: tuple[str, ...] = tuple(CHECKS)) -> FaultResult:
    """One verification of ``model`` with ``fault`` injected (export left out: it replays the stages'
    own eager output, so it cannot see a fault)."""
    with fault.injected():
        try:
            rows = run_verification(model, export=False, checks=checks)
        except Exception as error:  # a port that crashes is caught too, unless the crash is the oracle's
            where = _raised_in(error)
            return FaultResult(
                fault, error=f"{type(error).__name__} in {where}: {error}", oracle_crashed=where == "oracle"
            )
    return FaultResult(fault, failed=tuple(row for row in rows if not row.passed))


def _raised_in(error: BaseException) -> str:
    """``"oracle"`` when the innermost frame of this package that raised lies in the oracle (a
    broken check, which must never count as a caught fault), else ``"runtime"``."""
    package = Path(__file__).resolve().parents[1]
    innermost = "runtime"
    for frame, _ in traceback.walk_tb(error.__traceback__):
        path = Path(frame.f_code.co_filename).resolve()
        if path.is_relative_to(package):
            innermost = "oracle" if path.is_relative_to(package / "oracle") else "runtime"
    return innermost


def format_result(result: FaultResult) -> str:
    """One line per fault: CAUGHT / MISSED / n/a, its name, and what caught it first."""
    name = result.fault.name
    if not result.applicable:
        return f"n/a     {name:<30} (the model has no vision tower)"
    if result.oracle_crashed:
        return f"BROKEN  {name:<30} the checks raised, not the runtime: {result.error[:100]}"
    if result.error is not None:
        return f"CAUGHT  {name:<30} raised {result.error[:100]}"
    if not result.failed:
        return f"MISSED  {name:<30} no check failed: {result.fault.bug}"
    first = result.failed[0]
    return f"CAUGHT  {name:<30} by {len(result.failed)} rows, first: {first.stage} / {first.check}"
