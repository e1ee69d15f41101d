"""A case of the schedules grid (and of the long context): a prompt of one row fed to the port in a
chunk schedule, then decode steps; the grid's plan of cases within a budget of port calls, a case
run on a port, and its judgement (or the port's traceback). A port that needs an image in every
prompt gets its profile's image before each prompt's text (:func:`image_prefix`)."""

from __future__ import annotations

import dataclasses
import itertools
import traceback
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ...cpu.schedule import chunk_starts, expand_schedule
from ...ports import Gemma4Port, NotExposed
from ...ports.prompt import Prompt
from ..references.samples import profile_prompt, text_prompt
from ..session.port_calls import raised_in
from ..session.session import Session
from .boundaries import chunk_schedules, decode_steps, image_prompt_lengths
from .judgement import Judgement, Observed, Scored

PRIORITY = ("policy", "one call", "uneven mix", "chunks of W + 1", "chunks of W", "chunks of W - 1",
            "chunks of W + 2", "chunks of 2W", "chunks of C", "chunks of 1")  # fmt: skip


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


Score = Callable[[Case, Observed], Judgement | Scored]  # a case's judgement (float32) or score (a profile)


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
    lengths = image_prompt_lengths(window, max_seq - 2, prefix)
    schedules = chunk_schedules(window, port.limits.chunks.max_length or max_seq)
    seen, cases, refused = set(), [], []
    for name in PRIORITY:
        if name not in schedules:
            continue
        schedule = None if name == "policy" else schedules[name] or (max_seq,)  # one call: (max_seq,)
        for length in lengths:
            chunks = port.prefill_schedule(length) if schedule is None else expand_schedule(schedule, length)
            case = Case(length, name, tuple(chunks), min(decode_steps(length, window), max_seq - length - 1), schedule)
            if port.limits.chunks.refusal(chunks) is not None or splits(chunks, prefix):
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


NO_PROFILE = "{port} needs an image in every prompt and declares no image profile to put one before the text"


def image_prefix(session: Session) -> int | None:
    """Tokens of the port's profile image before each one-row prompt's text (0: text only), or
    ``None`` when the port needs an image in every prompt and declares no profile to put it in."""
    images = session.under_test.limits.images
    if not images.required:
        return 0
    return None if images.profile is None else images.profile.prefix_length


def one_row_prompt(session: Session, max_seq: int, prefix: int, seed: int) -> Prompt:
    """One row of ``max_seq`` tokens whose prefixes the cases run: text, or with ``prefix`` the image
    of the port's profile first (a port that needs an image in every prompt)."""
    if prefix:
        return profile_prompt(session.config, session.under_test.limits.images.profile, max_seq - prefix, seed=seed)
    return text_prompt(session.config, [max_seq], seed=seed)


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
