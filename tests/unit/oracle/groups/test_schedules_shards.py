"""The schedules grid split over shards: each shard runs its share of the prompt lengths, every
length in exactly one shard, each shard counting the cases it ran; each outcome a cell of the grid's
picture at its case."""

from __future__ import annotations

import re

from gemma4_static.oracle.episodes.cases import Case
from gemma4_static.oracle.episodes.judgement import Judgement, Scored
from gemma4_static.oracle.flow.verify import verify
from gemma4_static.oracle.groups.schedules import cell
from gemma4_static.oracle.options import VerifyOptions
from gemma4_static.oracle.shards import Shard


def _lengths_and_cases(tiny_model, shard: Shard | None) -> tuple[list[int], int]:
    rows = verify(tiny_model, VerifyOptions(groups=("schedules",), schedules_budget=60, shard=shard)).rows
    lengths = [int(match[1]) for row in rows if (match := re.match(r"prompt (\d+):", row.check))]
    (counted,) = [row for row in rows if row.check.startswith("cases run")]
    return lengths, counted.value


def test_every_prompt_length_is_run_by_exactly_one_shard(tiny_model):
    whole, cases = _lengths_and_cases(tiny_model, None)
    first, first_cases = _lengths_and_cases(tiny_model, Shard(1, 2))
    second, second_cases = _lengths_and_cases(tiny_model, Shard(2, 2))
    assert first and second and not set(first) & set(second)
    assert sorted(first + second) == whole and first_cases + second_cases == cases


def test_each_outcome_is_a_cell_at_its_case():
    """A cell of the grid's picture keeps its case (length, schedule, chunks) whatever the outcome: a
    float judgement, an integer profile's score (its SQNR, higher is better), a refusal, a raise."""
    case = Case(20, "chunk ends", (7, 7, 6), 3, (7,))
    where = {"length": 20, "schedule": "chunk ends", "chunks": "[7, 7, 6]"}
    judged = cell(case, Judgement(2e-3, 1e-3, 40, first="step 2"))
    assert judged.items() >= {**where, "outcome": "fail", "value": 2e-3, "first": "step 2"}.items()
    scored = cell(case, Scored(31.0, 33.0, 24.0, None))
    assert scored.items() >= {**where, "outcome": "pass", "value": 31.0, "tolerance": 24.0}.items()
    assert scored["higher_is_better"] is True and judged["higher_is_better"] is False
    assert cell(case, "refused").items() >= {**where, "outcome": "refused"}.items()
    raised = cell(case, "Traceback (most recent call last):\n  ...\nRuntimeError: no slot\n")
    assert raised.items() >= {**where, "outcome": "raised", "first": "RuntimeError: no slot"}.items()
