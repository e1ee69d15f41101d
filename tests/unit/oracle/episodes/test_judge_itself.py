"""The judge's own code, pinned: which prompt lengths and schedules the grid builds for given limits,
that each case runs on a port built with its schedule, that a length's row is its worst case, the
status and exit code of each kind of row, the tolerances, the fuzzer's strategies and the greedy
loop. Each test was seen failing on a deliberate break of the code it pins (docs/tests.md)."""

from __future__ import annotations

import logging
import math
import re

import pytest
import torch
from hypothesis import find, given, settings

from gemma4_static.cpu.greedy import greedy
from gemma4_static.oracle.episodes.boundaries import (
    chunk_schedules,
    grid_prompt_lengths,
    image_prompt_lengths,
    prompt_lengths,
)
from gemma4_static.oracle.episodes.cases import Case, chunks_text, plan, run_case, splits
from gemma4_static.oracle.episodes.judgement import Judgement, Scored
from gemma4_static.oracle.episodes.scores import length_row, sqnr_row
from gemma4_static.oracle.flow.verify import MINIMUM, verify
from gemma4_static.oracle.fuzz.strategies import boundaries, length_anchors, near_anchors, schedules
from gemma4_static.oracle.options import VerifyOptions
from gemma4_static.oracle.references.samples import text_prompt
from gemma4_static.oracle.results import tolerances
from gemma4_static.oracle.results.report import Row, explained, skip_row
from gemma4_static.oracle.results.verdict import ExitCode, Verdict
from gemma4_static.ports import PortSetup
from gemma4_static.ports.limits import ChunkLimits, PortLimits
from gemma4_static.ports.static import StaticRuntimePort
from tests.unit.ports import port_adapters

# The tiny model's grid (window 6, max_seq 36, a port that takes any schedule): length, schedule,
# chunks, decode steps, in the order the grid runs them (most telling schedules first)
TINY_GRID = """
     1 policy           [1]                      7
     5 policy           [5]                      3
     6 policy           [6]                      2
     7 policy           [7]                      7
    12 policy           [12]                     2
    13 policy           [13]                     7
    20 policy           [20]                     6
    27 policy           [27]                     5
     5 uneven mix       [1, 4]                   3
     6 uneven mix       [1, 5]                   2
     7 uneven mix       [1, 6]                   7
    12 uneven mix       [1, 6, 2, 3]             2
    13 uneven mix       [1, 6, 2, 4]             7
    20 uneven mix       [1, 6, 2, 7, 3, 1]       6
    27 uneven mix       [1, 6, 2, 7, 3 x 3, 2]   5
    12 chunks of W + 1  [7, 5]                   2
    13 chunks of W + 1  [7, 6]                   7
    20 chunks of W + 1  [7, 7, 6]                6
    27 chunks of W + 1  [7 x 3, 6]               5
     7 chunks of W      [6, 1]                   7
    12 chunks of W      [6, 6]                   2
    13 chunks of W      [6, 6, 1]                7
    20 chunks of W      [6 x 3, 2]               6
    27 chunks of W      [6 x 4, 3]               5
     6 chunks of W - 1  [5, 1]                   2
     7 chunks of W - 1  [5, 2]                   7
    12 chunks of W - 1  [5, 5, 2]                2
    13 chunks of W - 1  [5, 5, 3]                7
    20 chunks of W - 1  [5 x 4]                  6
    27 chunks of W - 1  [5 x 5, 2]               5
    12 chunks of W + 2  [8, 4]                   2
    13 chunks of W + 2  [8, 5]                   7
    20 chunks of W + 2  [8, 8, 4]                6
    27 chunks of W + 2  [8 x 3, 3]               5
    13 chunks of 2W     [12, 1]                  7
    20 chunks of 2W     [12, 8]                  6
    27 chunks of 2W     [12, 12, 3]              5
     5 chunks of 1      [1 x 5]                  3
     6 chunks of 1      [1 x 6]                  2
     7 chunks of 1      [1 x 7]                  7
    12 chunks of 1      [1 x 12]                 2
    13 chunks of 1      [1 x 13]                 7
    20 chunks of 1      [1 x 20]                 6
    27 chunks of 1      [1 x 27]                 5
"""


class Limited:
    """A port as the grid's planner sees it: its limits and its own policy (one call)."""

    def __init__(self, limits: PortLimits) -> None:
        self.limits = limits

    def prefill_schedule(self, length: int) -> list[int]:
        return [length]


def _lines(cases: list[Case]) -> list[str]:
    return [" ".join(f"{case.length} {case.name} {chunks_text(case.chunks)} {case.steps}".split()) for case in cases]


def test_the_grid_builds_these_lengths_and_schedules():
    assert prompt_lengths(6, 34) == [1, 5, 6, 7, 12, 13, 20, 27]
    # after an image of 8 tokens: one text token, then the window's edges past it (absolute positions)
    assert image_prompt_lengths(6, 34, 8) == [9, 12, 13, 20, 27]
    # an image spanning every edge (a window far below it): the lengths counted after it
    assert image_prompt_lengths(6, 60, 30) == [31, 35, 36, 37, 42, 43, 50, 57]
    assert image_prompt_lengths(6, 8, 8) == []  # no room for a text token after the image
    assert image_prompt_lengths(6, 9, 8) == [9]  # room for one
    for window, longest in ((1, 9), (2, 9), (6, 34), (6, 5), (6, 0)):  # no image: the text lengths
        assert image_prompt_lengths(window, longest, 0) == prompt_lengths(window, longest)
    assert grid_prompt_lengths(6, 0) == [1, 5, 6, 7, 12, 13, 20, 27]  # up to 4W + 3 text tokens
    assert grid_prompt_lengths(6, 8) == [9, 12, 13, 20, 27]  # the edges past an image of 8 tokens
    assert grid_prompt_lengths(6, 30) == [31, 35, 36, 37, 42, 43, 50, 57]  # 4W + 3 text tokens after 30
    assert chunk_schedules(6, 36) == {
        "one call": None, "chunks of 1": (1,), "chunks of W - 1": (5,), "chunks of W": (6,), "chunks of W + 1": (7,),
        "chunks of W + 2": (8,), "chunks of 2W": (12,), "chunks of C": (36,), "policy": None,
        "uneven mix": (1, 6, 2, 7, 3),
    }  # fmt: skip
    cases, refused, dropped = plan(Limited(PortLimits(chunks=ChunkLimits(chunked=True))), 6, 36, budget=10**6)
    assert _lines(cases) == [" ".join(line.split()) for line in TINY_GRID.strip().splitlines()]
    assert refused == dropped == []


def test_the_grid_refuses_what_a_ports_limits_refuse_and_runs_the_rest():
    cases, refused, _ = plan(Limited(PortLimits(chunks=ChunkLimits(chunked=True, max_length=7))), 6, 36, budget=10**6)
    assert {(case.name, case.length) for case in refused} == {
        (name, length)
        for name in ("chunks of 2W", "chunks of W + 2", "one call", "policy")
        for length in (12, 13, 20, 27)
    }
    assert len(cases) == 33 and max(max(case.chunks) for case in cases) == 7
    cases, refused, _ = plan(Limited(PortLimits(chunks=ChunkLimits(chunked=False))), 6, 36, budget=10**6)
    assert [case.name for case in cases] == ["policy"] * 8 and len(refused) == 36  # every split prompt refused


class ChunksOfFour(Limited):
    """A port whose own policy cuts a prompt into chunks of 4."""

    def prefill_schedule(self, length: int) -> list[int]:
        return [4] * (length // 4) + ([length % 4] if length % 4 else [])


def test_the_policy_cases_run_the_ports_own_schedule():
    cases, _, _ = plan(ChunksOfFour(PortLimits(chunks=ChunkLimits(chunked=True))), 6, 36, budget=10**6)
    policy = [(case.length, case.chunks) for case in cases if case.name == "policy"]
    assert policy[:3] == [(1, (1,)), (5, (4, 1)), (6, (4, 2))] and len(policy) == 8


def test_the_budget_keeps_the_most_telling_cases_and_counts_the_rest():
    cases, _, dropped = plan(Limited(PortLimits(chunks=ChunkLimits(chunked=True))), 6, 36, budget=100)
    assert sum(case.cost for case in cases) == 98 and len(cases) == 15 and len(dropped) == 29
    assert [case.name for case in cases[:8]] == ["policy"] * 8  # the port's own policy first, every length


def test_each_case_runs_on_a_port_built_with_its_schedule(tiny_model, caplog):
    port_adapters.SCHEDULES_SEEN.clear()
    options = VerifyOptions(
        port=f"{port_adapters.__name__}:ScheduleRecorder", groups=("schedules",), schedules_budget=150
    )
    with caplog.at_level(logging.INFO, logger="gemma4_static.oracle.groups.schedules"):
        result = verify(tiny_model, options)
    (said,) = [record.getMessage() for record in caplog.records if record.name.endswith("groups.schedules")]
    assert re.fullmatch(r"schedules grid: \d+ cases, \d+ port calls", said), said
    cells = [cell for cell in result.figures["grid"] if cell["outcome"] == "pass"]
    ran = {(length, chunks_text(tuple(chunks))) for length, chunks in port_adapters.SCHEDULES_SEEN}
    assert len(cells) >= 10 and {(cell["length"], cell["chunks"]) for cell in cells} <= ran


def _case(length: int, name: str, chunks: tuple[int, ...]) -> Case:
    return Case(length, name, chunks, 2, None if name == "policy" else chunks)


@pytest.mark.parametrize("worst_first", [True, False])
def test_a_prompt_lengths_row_is_its_worst_case(worst_first):
    good = (_case(12, "policy", (12,)), Judgement(error=1e-5, tolerance=5e-4, compared=14))
    bad = (_case(12, "chunks of W", (6, 6)), Judgement(error=2e-3, tolerance=5e-4, compared=14, first="position 7"))
    row = length_row(12, [bad, good] if worst_first else [good, bad], "schedules")
    assert row.status == "FAIL" and row.value == 2e-3 and row.tolerance == 5e-4
    assert row.check.endswith("[first: chunks of W [6, 6]: position 7]")
    worse = (_case(12, "chunks of 4", (4, 4, 4)), Judgement(1e-3, 5e-4, 14, first="position 9"))
    row = length_row(12, [bad, good, worse], "schedules")  # every failing case after the first: its detail
    assert row.check.endswith("[first: chunks of W [6, 6]: position 7]")
    assert row.detail == "chunks of 4 [4 x 3]: position 9" and row.value == 2e-3
    # worst relative to its own tolerance (one widened by HF's disagreement): not the largest error
    widened = (_case(12, "chunks of 3", (3,) * 4), Judgement(1e-3, 1e-2, 14, hf_disagreement=9.5e-3))
    tight = (_case(12, "chunks of 2", (2,) * 6), Judgement(4e-4, 5e-4, 14))
    row = length_row(12, [widened, tight], "schedules")
    assert (row.value, row.tolerance, row.hf, row.status) == (4e-4, 5e-4, 9.5e-3, "PASS")
    raised = length_row(12, [(good[0], "Traceback\nIndexError: slot 12")], "schedules")
    assert raised.hf is None and raised.raised and raised.status == "FAIL"  # nothing judged: no HF figure
    assert raised.check.startswith("prompt 12: 1 schedule, chunk ends, last token, 2 decode steps [first: ")
    assert row.check == "prompt 12: 2 schedules, chunk ends, last token, 2 decode steps"  # counted, plural
    high, low = Scored(30.0, 32.0, 20.0, None), Scored(12.0, 31.0, 20.0, "position 3: 12.0 dB")
    results = [(bad[0], low), (good[0], high)] if worst_first else [(good[0], high), (bad[0], low)]
    row = sqnr_row(12, results, "schedules")
    assert row.status == "FAIL" and row.value == 12.0 and row.hf == 31.0
    raised = sqnr_row(12, [(good[0], "Traceback\nIndexError: slot 12")], "schedules")
    assert raised.raised == "Traceback\nIndexError: slot 12" and raised.status == "FAIL" and math.isnan(raised.value)


def test_a_rows_detail_lists_the_five_failing_cases_after_the_one_its_check_names():
    """Eight failing schedules of one prompt length: the check names the first, the detail the next
    five (a long list of cases is cut there), in the schedules and in the SQNR rows alike."""
    cases = [_case(12, f"chunks of {size}", (size,) * (12 // size)) for size in (1, 2, 3, 4, 6, 12, 12, 12)]
    judged = [(case, Judgement(1e-3, 5e-4, 14, first=f"position {index}")) for index, case in enumerate(cases)]
    scored = [(case, Scored(10.0, 31.0, 20.0, f"position {index}: 10.0 dB")) for index, case in enumerate(cases)]
    next_five = [
        "chunks of 2 [2 x 6]",
        "chunks of 3 [3 x 4]",
        "chunks of 4 [4 x 3]",
        "chunks of 6 [6, 6]",
        "chunks of 12 [12]",
    ]
    for row, tail in ((length_row(12, judged, "schedules"), ""), (sqnr_row(12, scored, "schedules"), ": 10.0 dB")):
        assert "[first: chunks of 1 [1 x 12]: position 0" in row.check
        assert row.detail.split("\n") == [f"{case}: position {index}{tail}" for index, case in enumerate(next_five, 1)]


MINIMUM_ROWS = (
    Row("prefill logits", "last", "max abs diff", 1e-6, 1e-4),
    Row("decode steps", "all", "max abs diff", 1e-6, 1e-4),
)


@pytest.mark.parametrize(
    ("row", "minimum", "status", "code"),
    [
        (Row("masks prefill", "full", "mismatched entries", 0, 0), True, "PASS", ExitCode.PASSED),
        (Row("decoder layers", "layer 3", "max abs diff", math.nan, 1e-4), True, "FAIL", ExitCode.FAILED),
        (Row("layers", "layer 3", "SQNR dB", math.nan, 30.0, higher_is_better=True), True, "FAIL", ExitCode.FAILED),
        (Row("KV cache", "K", "errors", 1, 0, raised="Traceback: IndexError"), True, "FAIL", ExitCode.PORT_RAISED),
        (Row("RoPE", "full", "max abs diff", 2.0, 2.5e-7, expected="its cast"), True, "XFAIL", ExitCode.PASSED),
        (explained(Row("RoPE", "full", "max abs diff", 2.0, 2.5e-7), lambda row: ""), True, "FAIL", ExitCode.FAILED),
        (Row("generation", "prefix", "matched prefix", 3, math.inf), True, "INFO", ExitCode.PASSED),
        (Row("masks prefill", "full", "mismatched entries", 0, 0), False, "PASS", ExitCode.NOTHING_COMPARED),
        (skip_row("prefill logits", "last", "not exposed"), False, "SKIP", ExitCode.NOTHING_COMPARED),
        (Row("prefill logits", "ties", "tied", 0, math.inf), False, "INFO", ExitCode.NOTHING_COMPARED),
    ],
)  # fmt: skip
def test_the_status_and_exit_code_of_each_kind_of_row(row, minimum, status, code):
    """A NaN fails (whichever way its metric points), a raised stage exits 3, a failure is XFAIL only
    with the port's reason, and without the prefill logits compared nothing is green (exit 5)."""
    rows = [*(MINIMUM_ROWS if minimum else MINIMUM_ROWS[1:]), row]
    assert row.status == status and Verdict.of(rows, minimum=MINIMUM).exit_code == code


def test_the_tolerances_and_the_token_bound():
    assert tolerances.relative(torch.float32, torch.tensor([0.5, -0.25])) == 2e-5  # at least 1 in scale
    assert tolerances.relative(torch.float32, torch.tensor([3.0, -30.0])) == pytest.approx(6e-4)
    assert tolerances.token_bound(torch.tensor([[3.0, math.nan]])) == pytest.approx(2 * 6e-5)
    assert tolerances.ROPE[torch.float32] == 2.5e-7 and tolerances.ROPE[torch.bfloat16] == 2.0**-8
    assert tolerances.ROPE[torch.float16] == 2.0**-11
    assert tolerances.scaled(1e-3, torch.empty(0)) == 1e-3


def test_the_fuzzers_anchors_and_chunk_ends():
    assert near_anchors([6], 1, 20) == [1, 2, 3, 4, 5, 6, 7, 8, 18, 19, 20]
    assert length_anchors(6, 36, 40) == [1, 6, 12, 18, 24, 36, 40]
    assert boundaries((3, 5), 20) == [3, 8, 13, 18, 20] and boundaries(None, 20) == []


def test_the_fuzzer_draws_every_kind_of_schedule():
    drawn = schedules(6, 36)
    assert find(drawn, lambda schedule: schedule is None) is None
    assert len(find(drawn, lambda schedule: schedule is not None and len(schedule) == 1)) == 1
    assert len(set(find(drawn, lambda schedule: schedule is not None and len(schedule) >= 2))) >= 2


@settings(max_examples=50, deadline=None)
@given(schedules(6, 36))
def test_a_drawn_schedule_holds_chunks_the_port_can_take(schedule):
    assert schedule is None or (
        all(1 <= chunk <= 36 for chunk in schedule) and (len(schedule) == 1 or len(set(schedule)) > 1)
    )


def test_the_greedy_loop_feeds_each_argmax_and_pads_a_finished_row():
    """Row 0 says EOS (id 2) at its second step and is padded (id 0) after it; row 1 goes on; the
    loop decodes one step fewer than it emits and stops when every row is done."""
    script = iter([torch.tensor([5, 6]), torch.tensor([2, 7]), torch.tensor([9, 2])])
    fed = []

    def decode(tokens: torch.Tensor) -> torch.Tensor:
        fed.append(tokens[:, 0].tolist())
        return torch.nn.functional.one_hot(next(script), 10).float()

    first = torch.nn.functional.one_hot(torch.tensor([4, 3]), 10).float()
    tokens = greedy(first, decode, max_new_tokens=6, eos=torch.tensor([2]), pad_token_id=0)
    assert tokens.tolist() == [[4, 5, 2, 0, 0, 0], [3, 6, 7, 2, 0, 0]]
    assert fed == [[4, 3], [5, 6], [2, 7]]  # each step's argmax; nothing after the last row's EOS


def test_a_case_observes_every_output_at_its_position_with_its_kind(tiny_model):
    """A case's observations, each at the position its logits stand for and named by what returned
    it (the name a divergence is reported with): each chunk's end, the prompt's last token (the last
    chunk's end again: both are judged), each decode step."""
    base = text_prompt(tiny_model.config, [12], seed=3)
    port = StaticRuntimePort(tiny_model, PortSetup(16, 1, prefill_schedule=(3,)))
    observed = run_case(port, base, Case(6, "chunks of 3", (3, 3), 2, (3, 3)))
    assert [(o.position, o.kind) for o in observed.rows[0]] == [
        (2, "chunk end"),
        (5, "chunk end"),
        (5, "last prompt token"),
        (6, "decode step 0"),
        (7, "decode step 1"),
    ]
    assert all(o.logits.shape == (tiny_model.config.get_text_config().vocab_size,) for o in observed.rows[0])


def test_each_refused_case_is_a_cell_of_the_grid_and_counted(tiny_model):
    """A port that takes chunks of at most 7: the schedules its limits refuse are cells of the grid's
    picture marked refused, at their prompt length and schedule, and counted in the cases row."""
    port = f"{port_adapters.__name__}:ChunksUpToSeven"
    result = verify(tiny_model, VerifyOptions(port=port, groups=("schedules",), schedules_budget=60))
    refused = {(cell["length"], cell["schedule"]) for cell in result.figures["grid"] if cell["outcome"] == "refused"}
    assert (12, "chunks of 2W") in refused and (27, "one call") in refused and all(length > 7 for length, _ in refused)
    (counted,) = [row for row in result.rows if row.check.startswith("cases run")]
    assert f"({len(refused)} refused by the port's limits" in counted.check


def test_a_schedule_splits_the_image_prefix_only_where_a_chunk_ends_inside_it():
    """The prefix (an image of the port's profile, 4 tokens here) must lie inside one chunk: a chunk
    ending at its last token keeps it whole; one ending before cuts it; no prefix, nothing to cut."""
    assert not splits([4, 4], 4) and not splits([6, 2], 4) and not splits([1, 1], 0)
    assert splits([3, 5], 4) and splits([1, 7], 4)
