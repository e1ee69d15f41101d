"""A property-based differential fuzzer for any port: a hypothesis state machine (:mod:`.machine`)
over a port's prefills in drawn schedules, decode runs, generation and the calls it must refuse,
judged against HF after every step; a failure shrunk to its shortest form and written out as a
standalone reproduction (:mod:`.repro`). The schedules grid of ``verify`` shares its boundaries
(:mod:`.boundaries`) and its judge (:mod:`.episode`).

``fuzz(target, max_examples=..., seed=...)`` runs it; ``gemma4-static fuzz`` and the plugin's
``--gemma4-fuzz N`` call it (several processes share one example database)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..checks.report import Row
from .target import FuzzTarget

STEPS = 8  # calls per example at most


@dataclass(frozen=True)
class FuzzResult:
    """What a run found: the examples it ran in how many seconds, the first failure's examples and
    seconds, and the (shrunk) failure with the calls that make it and its reproduction."""

    port: str
    examples: int
    seconds: float
    failure: str | None = None
    first_failure: tuple[int, float] | None = None
    reproduction: Path | None = None
    expected: str | None = None  # the port's documented reason for the failure (an expected failure)

    @property
    def rate(self) -> float:
        return self.examples / self.seconds if self.seconds else 0.0


def fuzz(
    target: FuzzTarget,
    *,
    max_examples: int,
    seed: int = 0,
    database: Path | None = None,
    reproduction: Path | None = None,
    images: Any = None,
    steps: int = STEPS,
    shrink: bool = True,
) -> FuzzResult:
    """Run the state machine of ``target`` for ``max_examples`` examples from ``seed`` (failures kept in
    the example ``database`` folder, which several processes may share); a failure (shrunk unless
    ``shrink`` is off) written as a reproduction into ``reproduction`` (text prompts only)."""
    from hypothesis import HealthCheck, Phase, settings
    from hypothesis import seed as seeded
    from hypothesis.database import DirectoryBasedExampleDatabase
    from hypothesis.stateful import run_state_machine_as_test

    from .machine import Divergence, decode_before_prefill, machine_for
    from .repro import write_reproduction

    phases = list(Phase) if shrink else [phase for phase in Phase if phase != Phase.shrink]
    options = settings(
        max_examples=max_examples,
        stateful_step_count=steps,
        deadline=None,
        database=None if database is None else DirectoryBasedExampleDatabase(str(database)),
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
        phases=phases,
    )
    target.examples, target.first_failure, target.started = 0, None, time.perf_counter()
    machine = seeded(seed)(machine_for(target, images=images))
    failure, script, expected = None, None, None
    try:
        refused = decode_before_prefill(target)
        if refused is not None:
            target.first_failure = (0, time.perf_counter() - target.started)
            raise refused
        run_state_machine_as_test(machine, settings=options)
    except Divergence as divergence:
        failure = str(divergence)
        if reproduction is not None:
            script = write_reproduction(reproduction, target, divergence.calls, failure)
        expected = target.port(None).explain(Row("fuzz", failure, "divergences", 1, 0, detail=failure))
    finally:
        target.close()
    seconds = time.perf_counter() - target.started
    return FuzzResult(target.name, target.examples, seconds, failure, target.first_failure, script, expected)


__all__ = ["FuzzResult", "FuzzTarget", "fuzz"]
