"""The schedules grid split over shards: each shard runs its share of the prompt lengths, every
length in exactly one shard, each shard counting the cases it ran."""

from __future__ import annotations

import re

from gemma4_static.oracle.flow.verify import verify
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
