"""The ``schedules`` check group: a deterministic grid of prompt lengths and chunk schedules around
the sliding window, each prefill followed by decode steps across the next window and ring boundary;
the port's logits at every chunk's last token, the prompt's last token and every decode step against
HF's forward over the same tokens (one forward: every case's history is a prefix of one sequence),
judged by :mod:`.schedule_scores` (in float32 within its tolerances; in a low-precision profile
against HF in float64 under the profile's gate)."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
import traceback
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from ...cpu.schedule import chunk_starts, expand_schedule
from ...ports.base import Gemma4Port, NotExposed, PortSetup
from ...ports.prompt import Prompt
from ..checks.figures import grid_cell
from ..checks.report import Row, skip_row
from ..fuzz.boundaries import chunk_schedules, decode_steps, image_prompt_lengths, prompt_lengths
from ..fuzz.episode import Judgement, Observed
from ..references.samples import profile_prompt, text_prompt
from .port_calls import raised_in
from .sample_plan import SEEDS
from .schedule_scores import Score, Scored, hf_references, length_row, scored_in_profile, sqnr_row
from .session import Session
from .shards import Shard

PRIORITY = ("policy", "one call", "uneven mix", "chunks of W + 1", "chunks of W", "chunks of W - 1",
            "chunks of W + 2", "chunks of 2W", "chunks of C", "chunks of 1")  # fmt: skip
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Case:
    """A prompt of ``length`` tokens fed in ``chunks`` (the schedule ``name``: the port's setup asks for
    ``schedule``, ``None`` for its own policy), then ``steps`` decode steps."""

    length: int
    name: str
    chunks: tuple[int, ...]
    steps: int
    schedule: tuple[int, ...] | None

    @property
    def cost(self) -> int:
        """Port calls: one per chunk and per decode step."""
        return len(self.chunks) + self.steps

    def describe(self) -> str:
        return f"{self.name} {chunks_text(self.chunks)}"


def chunks_text(chunks: tuple[int, ...]) -> str:
    """``[7, 7, 6]``; runs of one length shortened: ``[1 x 27]``, ``[1, 6, 2, 7, 3 x 4]``."""
    runs: list[list[int]] = []
    for chunk in chunks:
        if runs and runs[-1][0] == chunk:
            runs[-1][1] += 1
        else:
            runs.append([chunk, 1])
    return (
        "["
        + ", ".join(f"{chunk} x {count}" if count > 2 else ", ".join([str(chunk)] * count) for chunk, count in runs)
        + "]"
    )


def plan(
    port: Gemma4Port, window: int, max_seq: int, budget: int, prefix: int = 0
) -> tuple[list[Case], list[Case], list[Case]]:
    """The grid's cases within ``budget`` port calls (most telling schedules first, a case that does
    not fit skipped for cheaper ones), the cases the port's limits refuse and those the budget drops;
    ``prefix`` tokens (an image in the port's profile) before each prompt's text lengths."""
    lengths = image_prompt_lengths(window, max_seq - 2, prefix) if prefix else prompt_lengths(window, max_seq - 2)
    schedules = chunk_schedules(window, port.limits.max_chunk or max_seq)
    seen, cases, refused = set(), [], []
    for name in PRIORITY:
        if name not in schedules:
            continue
        schedule = None if name == "policy" else schedules[name] or (max_seq,)  # one call: (max_seq,)
        for length in lengths:
            chunks = port.prefill_schedule(length) if schedule is None else expand_schedule(schedule, length)
            case = Case(length, name, tuple(chunks), min(decode_steps(length, window), max_seq - length - 1), schedule)
            if port.limits.refusal(chunks) is not None or splits(chunks, prefix):
                refused.append(case)
            elif (length, case.chunks) not in seen:
                seen.add((length, case.chunks))
                cases.append(case)
    chosen, dropped, spent = [], [], 0
    for case in cases:
        fits = spent + case.cost <= budget
        (chosen if fits else dropped).append(case)
        spent += case.cost if fits else 0
    return chosen, refused, dropped


def splits(chunks: list[int], prefix: int) -> bool:
    """Whether a chunk ends inside the ``prefix`` (an image's span: it lies inside one chunk)."""
    return any(end < prefix for end in itertools.accumulate(chunks))


def run_case(port: Gemma4Port, base: Prompt, case: Case) -> Observed:
    """The port's logits over one case: the first ``length`` tokens of ``base`` (one row, with its
    images) prefilled, then its next tokens decoded one by one."""
    observed = Observed()
    ids = base.input_ids
    prompt = dataclasses.replace(
        base, input_ids=ids[:, : case.length], attention_mask=torch.ones_like(ids[:, : case.length])
    )
    several = len(case.chunks) > 1  # the chunk-end logits (a single call's end is the last token)
    result = port.prefill(prompt, keep_intermediates=several)
    if result.chunk_logits is not None:
        if len(result.chunk_logits) != len(case.chunks):
            raise ValueError(f"the port returned {len(result.chunk_logits)} chunk logits for {len(case.chunks)} chunks")
        for start, chunk, logits in zip(chunk_starts(case.chunks), case.chunks, result.chunk_logits, strict=True):
            observed.add(0, start + chunk - 1, logits[0], "chunk end")
    observed.add(0, case.length - 1, result.logits[0], "last prompt token")
    for step in range(case.steps):
        position = case.length + step
        observed.add(0, position, port.decode(ids[:, position : position + 1])[0], f"decode step {step}")
    return observed


def schedules_rows(session: Session) -> Iterator[Row]:
    """One row per prompt length (every schedule of it merged; a failure names the schedule and the
    first diverging position), and an INFO row counting the cases run, refused and over budget (in a
    shard, :mod:`.shards`: its prompt lengths only)."""
    window, prefix = session.window, image_prefix(session)
    if prefix is None:
        yield skip_row("schedules", "grid", NO_PROFILE.format(port=session.port.name))
        return
    longest = 4 * window + 3
    lengths = image_prompt_lengths(window, longest + prefix, prefix) if prefix else prompt_lengths(window, longest)
    max_seq = session.capped(max(length + decode_steps(length, window) for length in lengths) + 1)
    base = one_row_prompt(session, max_seq, prefix, SEEDS["schedules"])
    score = scored_in_profile(session, base) if session.low_precision else hf_references(session, base)
    results: dict[int, list[tuple[Case, Judgement | Scored | str]]] = {}
    with session.built(PortSetup(max_seq, image_slots=base.image_slots)) as policy_port:
        cases, refused, dropped = plan(policy_port, window, max_seq, session.schedules_budget, prefix)
        if session.shard is not None:  # the whole grid planned, then this shard's prompt lengths kept
            cases, refused, dropped = sharded(session.shard, cases, refused, dropped)
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
        yield sqnr_row(length, results[length]) if session.low_precision else length_row(length, results[length])
    check = f"cases run: {len(cases)} ({len(refused)} refused by the port's limits, {len(dropped)} over the budget)"
    yield Row("schedules", check, "cases", len(cases), float("inf"))


NO_PROFILE = "{port} needs an image in every prompt and declares no image profile to put one before the text"


def image_prefix(session: Session) -> int | None:
    """Tokens of the port's profile image before each one-row prompt's text (0: text only), or
    ``None`` when the port needs an image in every prompt and declares no profile to put it in."""
    limits = session.port.limits
    if not limits.needs_image:
        return 0
    return None if limits.image_profile is None else limits.image_profile.prefix_length


def one_row_prompt(session: Session, max_seq: int, prefix: int, seed: int) -> Prompt:
    """One row of ``max_seq`` tokens whose prefixes the cases run: text, or with ``prefix`` the image
    of the port's profile first (a port that needs an image in every prompt)."""
    if prefix:
        return profile_prompt(session.config, session.port.limits.image_profile, max_seq - prefix, seed=seed)
    return text_prompt(session.config, [max_seq], seed=seed)


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
    """The case as a cell of the grid's picture (:func:`..checks.figures.grid_cell`): its judgement or
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


def judged_case(port: Gemma4Port, base: Prompt, case: Case, score: Score) -> Judgement | Scored | str:
    """The case's judgement (or score), or the port's traceback when it raised (``NotExposed`` and an
    error of the checks themselves propagate)."""
    try:
        observed = run_case(port, base, case)
    except NotExposed:
        raise
    except Exception as error:
        if raised_in(error) == "oracle":
            raise
        return traceback.format_exc()
    return score(case, observed)
