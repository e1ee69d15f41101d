"""The ``schedules`` check group: a deterministic grid of prompt lengths and chunk schedules around
the sliding window, each prefill followed by decode steps across the next window and ring boundary;
the port's logits at every chunk's last token, the prompt's last token and every decode step against
HF's forward over the same tokens (one forward: every case's history is a prefix of one sequence),
judged by :mod:`..episodes.scores` (in float32 within its tolerances; in a low-precision profile
against HF in float64 under the profile's gate). The cases themselves: :mod:`..episodes.cases`."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from ...ports import PortSetup
from ...ports.capabilities.image_profiles import IMAGE_PROFILES
from ...ports.capabilities.schedules import PREFILL_POLICY
from ..episodes.boundaries import decode_steps, grid_prompt_lengths
from ..episodes.cases import NO_PROFILE, Case, chunks_text, image_prefix, judged_case, one_row_prompt, plan
from ..episodes.judgement import Judgement, Scored
from ..episodes.scores import hf_references, length_row, scored_in_profile, sqnr_row
from ..results.figures import grid_cell
from ..results.report import Row, skip_row
from ..session.sample_plan import SEEDS
from ..session.session import Session
from ..shards import Shard
from . import CheckGroup

STAGE = "schedules"  # its rows' stage in a report
log = logging.getLogger(__name__)


def schedules_rows(session: Session) -> Iterator[Row]:
    """One row per prompt length (every schedule of it merged; a failure names the schedule and the
    first diverging position), and an INFO row counting the cases run, refused and over budget (in a
    shard, :mod:`.shards`: its prompt lengths only)."""
    window, prefix = session.window, image_prefix(session)
    if prefix is None:
        yield skip_row(STAGE, "grid", NO_PROFILE.format(port=session.port.name))
        return
    lengths = grid_prompt_lengths(window, prefix)
    max_seq = session.capped(max(length + decode_steps(length, window) for length in lengths) + 1)
    base = one_row_prompt(session, max_seq, prefix, SEEDS["schedules"])
    score = scored_in_profile(session, base) if session.low_precision else hf_references(session, base)
    results: dict[int, list[tuple[Case, Judgement | Scored | str]]] = {}
    with session.built(PortSetup(max_seq, image_slots=base.image_slots)) as policy_port:
        cases, refused, dropped = plan(policy_port, window, max_seq, session.options.schedules_budget, prefix)
        if session.options.shard is not None:  # the whole grid planned, then this shard's prompt lengths kept
            cases, refused, dropped = sharded(session.options.shard, cases, refused, dropped)
        log.info("schedules grid: %d cases, %d port calls", len(cases), sum(case.cost for case in cases))
        for schedule in dict.fromkeys(case.schedule for case in cases):  # a port per schedule, in plan order
            setup = PortSetup(max_seq, image_slots=base.image_slots, prefill_schedule=schedule)
            with contextlib.nullcontext(policy_port) if schedule is None else session.built(setup) as port:
                for case in (case for case in cases if case.schedule == schedule):
                    results.setdefault(case.length, []).append((case, judged_case(port, base, case, score)))
    run = [cell(case, outcome) for length in sorted(results) for case, outcome in results[length]]
    not_run = [cell(case, "refused") for case in refused] + [cell(case, "over budget") for case in dropped]
    session.figures["grid"] = run + not_run
    for length in sorted(results):
        yield (sqnr_row if session.low_precision else length_row)(length, results[length], STAGE)
    check = f"cases run: {len(cases)} ({len(refused)} refused by the port's limits, {len(dropped)} over the budget)"
    yield Row(STAGE, check, "cases", len(cases), float("inf"))


def sharded(shard: Shard, *parts: list[Case]) -> list[list[Case]]:
    """Each of ``parts`` (cases run, refused, over budget) cut to ``shard``'s prompt lengths: the
    grid's lengths shared by the tokens the port runs at each (every case's prompt and decode steps:
    what a call's time follows, :meth:`.shards.Shard.share`)."""
    costs = {case.length: 0 for part in parts for case in part}
    for case in parts[0]:
        costs[case.length] += case.length + case.steps
    mine = shard.share(costs)
    return [[case for case in part if case.length in mine] for part in parts]


def cell(case: Case, outcome: Judgement | Scored | str) -> dict:
    """The case as a cell of the grid's picture (:func:`..results.figures.grid_cell`): its judgement or
    score, ``"refused"`` / ``"over budget"``, or the traceback of a port that raised."""
    where = (case.length, case.name, chunks_text(case.chunks))
    if isinstance(outcome, Judgement):
        verdict = "fail" if outcome.diverged else "pass"
        return grid_cell(*where, verdict, value=outcome.error, tolerance=outcome.tolerance, first=outcome.first)
    if isinstance(outcome, Scored):
        verdict = "fail" if outcome.diverged else "pass"
        gated = {"value": outcome.sqnr_db, "tolerance": outcome.gate_db, "higher_is_better": True}
        return grid_cell(*where, verdict, **gated, first=outcome.first)
    if outcome in ("refused", "over budget"):
        return grid_cell(*where, outcome)
    return grid_cell(*where, "raised", first=outcome.strip().splitlines()[-1])


GROUP = CheckGroup(
    name="schedules",
    order=120,
    describe="a grid of prompt lengths and chunk schedules around the window, each prefill followed by decode "
    "steps across the next window and ring boundary, against HF's forward over the same tokens",
    rows=schedules_rows,
    reads=(PREFILL_POLICY, IMAGE_PROFILES),
    sharding="split",
    real_size="hundreds of prefills around a window of 512 tokens, each against HF's forward over the same "
    "tokens: days of two cores at E2B's real widths",
)
