"""The fuzzer's time budget: how many examples each hypothesis run of a budgeted fuzz takes, and that
a budgeted run on the default model ends cleanly with what it covered."""

from __future__ import annotations

import time
from types import SimpleNamespace

from gemma4_static.oracle.fuzz import BUDGETED_BATCH, FuzzTarget, budgeted_batch, fuzz
from gemma4_static.oracle.options import VerifyOptions


def target_after(seconds: float, examples: int) -> SimpleNamespace:
    return SimpleNamespace(started=time.perf_counter() - seconds, examples=examples)


def test_a_budget_runs_whole_batches_while_the_time_left_holds_them():
    assert budgeted_batch(target_after(0.0, 0), 60, 0, 100) == BUDGETED_BATCH  # no pace yet: a whole batch
    assert budgeted_batch(target_after(10.0, 5), 60, 5, 100) == BUDGETED_BATCH  # 2 s each, 50 s left
    assert budgeted_batch(target_after(50.0, 5), 60, 5, 100) == 0  # 10 s each, 10 s left: fewer than two
    assert budgeted_batch(target_after(40.0, 5), 60, 5, 100) == 2  # 8 s each, 20 s left: two
    assert budgeted_batch(target_after(10.0, 5), 60, 98, 100) == 2  # the examples asked for, no more
    assert budgeted_batch(target_after(61.0, 5), 60, 5, 100) == 0  # past the budget


def test_a_budgeted_fuzz_ends_cleanly_with_what_it_covered(tiny_model):
    result = fuzz(FuzzTarget.of(tiny_model, VerifyOptions()), max_examples=10**4, seed=0, max_seconds=1)
    assert result.failure is None and result.stopped and "time budget of 1 s" in result.stopped
    assert 2 <= result.examples < 10**4 and result.seconds < 1 + 5  # one batch's pace past it at most
    assert "prefill" in result.coverage and "prompt lengths in" in result.coverage
