"""A property-based differential fuzzer for any port: a hypothesis state machine (:mod:`.machine`)
over a port's prefills in drawn schedules, decode runs, generation and the calls it must refuse,
judged against HF after every step; a failure shrunk to its shortest form and written out as a
standalone reproduction (:mod:`.repro`). The schedules grid of ``verify`` shares its boundaries
and its judge (:mod:`..episodes`).

``fuzz(FuzzTarget.of(model, options), max_examples=..., seed=...)`` runs it; ``gemma4-static fuzz`` and the plugin's
``--gemma4-fuzz N`` call it (several processes share one example database)."""

from __future__ import annotations

import functools
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .target import FuzzTarget

STEPS = 8  # calls per example at most
BUDGETED_BATCH = 5  # examples per hypothesis run under a time budget (the budget is checked between runs)


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
    coverage: str = ""  # what the examples drew: calls by rule, prompt lengths, chunkings
    stopped: str | None = None  # why the run ended before its examples (its time budget)

    @property
    def rate(self) -> float:
        return self.examples / self.seconds if self.seconds else 0.0


def budgeted_batch(target: FuzzTarget, max_seconds: float, done: int, max_examples: int) -> int:
    """How many examples the next hypothesis run of a budgeted fuzz takes: :data:`BUDGETED_BATCH`
    (at least two: a run's first example is hypothesis's simplest) as far as the time left holds them
    at the pace of the examples so far; 0 when it holds fewer than two."""
    elapsed = time.perf_counter() - target.started
    pace = elapsed / target.examples if target.examples else 0.0
    fits = BUDGETED_BATCH if pace == 0.0 else int((max_seconds - elapsed) / pace)
    size = min(BUDGETED_BATCH, fits, max_examples - done)
    return size if size >= min(2, max_examples - done) and elapsed < max_seconds else 0


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
    max_seconds: float | None = None,
    special_ids: bool = True,
) -> FuzzResult:
    """Run the state machine of ``target`` for ``max_examples`` examples from ``seed`` (failures kept in
    the example ``database`` folder, which several processes may share); a failure (shrunk unless
    ``shrink`` is off) written as a reproduction into ``reproduction`` (text prompts only). Image
    prompts: ``images``, else the port's own profile where it needs an image. ``max_seconds``: examples
    run in hypothesis runs of at most :data:`BUDGETED_BATCH`, none started where the time left holds
    fewer than two at the pace so far (:func:`budgeted_batch`; the run ends cleanly with what it covered;
    a failure is reported as found, unshrunk: a run without a budget shrinks it from the database).
    ``special_ids``: decode inputs and prompts carry the model's special ids too."""
    from hypothesis import HealthCheck, Phase, settings
    from hypothesis import seed as seeded
    from hypothesis.database import DirectoryBasedExampleDatabase
    from hypothesis.stateful import run_state_machine_as_test

    from .machine import Divergence, decode_before_prefill, machine_for
    from .repro import write_reproduction

    shrink = shrink and max_seconds is None  # under a time budget a failure is reported as found
    phases = list(Phase) if shrink else [phase for phase in Phase if phase != Phase.shrink]
    options = functools.partial(
        settings,
        stateful_step_count=steps,
        deadline=None,
        database=None if database is None else DirectoryBasedExampleDatabase(str(database)),
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
        phases=phases,
    )
    target.examples, target.first_failure, target.started = 0, None, time.perf_counter()
    target.coverage = Counter()
    machine = machine_for(target, images=images or target.image_prompts(), special_ids=special_ids)
    failure, script, expected, stopped = None, None, None, None
    try:
        refused = decode_before_prefill(target)
        if refused is not None:
            target.first_failure = (0, time.perf_counter() - target.started)
            raise refused
        if max_seconds is None:
            run_state_machine_as_test(seeded(seed)(machine), settings=options(max_examples=max_examples))
        done, batch = 0, 0
        while max_seconds is not None and done < max_examples:
            size = budgeted_batch(target, max_seconds, done, max_examples)
            if size == 0:  # between hypothesis runs: each ends cleanly
                stopped = f"the time budget of {max_seconds:g} s was spent after {target.examples} examples"
                break
            run_state_machine_as_test(seeded(seed + batch)(machine), settings=options(max_examples=size))
            done, batch = done + size, batch + 1
    except Divergence as divergence:
        failure = str(divergence)
        images_fed = any(getattr(call.get("prompt"), "pixel_values", None) is not None for call in divergence.calls)
        if reproduction is not None and not images_fed:  # a script inlines text prompts only
            script = write_reproduction(reproduction, target, divergence.calls, failure)
        expected = target.port(None).explain(divergence.row)
    finally:
        target.close()
    seconds = time.perf_counter() - target.started
    coverage = target.coverage_summary()
    return FuzzResult(
        target.name, target.examples, seconds, failure, target.first_failure, script, expected, coverage, stopped
    )


__all__ = ["FuzzResult", "FuzzTarget", "fuzz"]
