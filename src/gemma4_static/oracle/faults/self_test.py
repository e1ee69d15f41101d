"""The self-test: the parity checks run once per catalogued fault (:mod:`.faults`) in data-flow order
until one catches it (the groups after the first failing one are not run), reporting which rows
caught it. A fault no check catches means the suite has a blind spot: the self-test fails."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...executorch.cache_program import fresh_programs
from ..flow.verify import run_verification
from ..groups.export import GROUP as EXPORT
from ..options import VerifyOptions
from ..references.recording import ACTIVE, Recording
from ..references.reference_folder import judged_live
from ..results.report import Row
from ..session.port_calls import raised_in
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
        """By a comparison that failed; by the port raising only where the fault says it raises (a
        patch that breaks the runtime another way is not the bug it describes)."""
        if self.oracle_crashed:
            return False
        if self.fault.raises is not None:
            return bool(self.failed) or self.error is not None
        return any(not row.raised for row in self.failed)

    @property
    def passed(self) -> bool:
        return self.caught or self.not_applicable is not None


def run_self_test(
    model: Any,
    options: VerifyOptions | None = None,
    *,
    faults: tuple[Fault, ...] = CATALOGUE,
    on_result: Callable[[FaultResult], None] = lambda result: None,
) -> tuple[list[Row], list[FaultResult]]:
    """The fault-free run's rows (all must pass for the results to mean anything), then one
    :class:`FaultResult` per fault, each from a fresh verification of ``model`` under ``options``
    (its groups but export, which replays the stages' own eager output and so cannot see a fault; a
    low-precision profile: its gates, so a fault must stand out of that precision's noise). HF is
    asked each question once: a fault is injected into the port, never into the reference, so the
    fault-free run's answers are recorded and read back by every fault's run (unless a reference or
    an outer recording already answers, and where HF's answers depend on the run:
    :func:`~..references.reference_folder.judged_live`)."""
    options = (options or VerifyOptions()).without(EXPORT.name)
    alone = options.reference is None and ACTIVE.get() is None and judged_live(model, options.quant) is None
    answers = Recording("record") if alone else None
    with contextlib.nullcontext() if answers is None else answers.active():
        baseline = run_verification(model, options)
        results = []
        for fault in faults:
            reason = fault.not_applicable(model, options.dtype, options.quant)
            result = run_fault(fault, model, options) if reason is None else FaultResult(fault, not_applicable=reason)
            on_result(result)
            results.append(result)
    return baseline, results


def run_fault(fault: Fault, model: Any, options: VerifyOptions | None = None) -> FaultResult:
    """One verification of ``model`` under ``options`` with ``fault`` injected, up to the first check
    group that fails (export left out, as :func:`run_self_test` says). On ExecuTorch the programs are
    lowered afresh under the fault, and forgotten after it (a program lowered before would hide the
    fault; one lowered under it must not outlive it)."""
    options = dataclasses.replace((options or VerifyOptions()).without(EXPORT.name), until_failure=True)
    with fault.injected(), fresh_programs(options.backend):
        try:
            rows = run_verification(model, options)
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
    if not result.caught and (result.error is not None or result.failed):
        raised = result.error or result.failed[0].detail
        return f"RAISED  {name:<30} the port raised, but the bug is a silent wrong answer: {raised[:100]}"
    if result.error is not None:
        return f"CAUGHT  {name:<30} raised {result.error[:100]}"
    if not result.failed:
        return f"MISSED  {name:<30} no check failed: {result.fault.bug}"
    first = result.failed[0]
    return f"CAUGHT  {name:<30} by {len(result.failed)} rows, first: {first.stage} / {first.check}"
