"""Hypothesis strategies biased to where ports break: values at and around anchors (the window, its
multiples, the port's longest chunk, ``max_seq``) drawn as often as any other value of the range."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable

from hypothesis import strategies as st

from ...cpu.schedule import expand_schedule
from ...ports.prompt import Prompt

NEAR = (-2, -1, 0, 1, 2)


def near_anchors(anchors: Iterable[int], low: int, high: int) -> list[int]:
    """The values in ``[low, high]`` within 2 of an anchor (the ends of the range are anchors too)."""
    return sorted({anchor + offset for anchor in (*anchors, low, high) for offset in NEAR} & set(range(low, high + 1)))


def near(anchors: Iterable[int], low: int, high: int) -> st.SearchStrategy[int]:
    """An int in ``[low, high]``: half the time one of :func:`near_anchors`, else any."""
    return st.one_of(st.sampled_from(near_anchors(anchors, low, high)), st.integers(low, high))


def length_anchors(window: int, longest_chunk: int, max_seq: int) -> list[int]:
    """Prompt and chunk lengths that matter: 1, the window and its multiples, the longest chunk, ``max_seq``."""
    return [1, window, 2 * window, 3 * window, 4 * window, longest_chunk, max_seq]


@st.composite
def schedules(draw: st.DrawFn, window: int, longest_chunk: int) -> tuple[int, ...] | None:
    """A prefill schedule: ``None`` (the port's own policy), one chunk length (chunks of it), or two to
    four lengths in order (the last repeating), each near the window or the longest chunk."""
    chunk = near(length_anchors(window, longest_chunk, longest_chunk), 1, longest_chunk)
    kind = draw(st.sampled_from(["policy", "uniform", "mixed"]))
    if kind == "policy":
        return None
    if kind == "uniform":
        return (draw(chunk),)
    return tuple(draw(st.lists(chunk, min_size=2, max_size=4).filter(lambda chunks: len(set(chunks)) > 1)))


def boundaries(schedule: tuple[int, ...] | None, max_seq: int) -> list[int]:
    """Where ``schedule``'s chunks end within ``max_seq`` (the last length repeating): prompt lengths
    that end a chunk exactly, or one token before or after it, are drawn as often as any other."""
    if schedule is None:
        return []
    return list(itertools.accumulate(expand_schedule(schedule, max_seq)))


def with_specials(prompt: Prompt, data: st.DataObject, specials: list[int]) -> Prompt:
    """``prompt`` with up to three of its text tokens (past the first; not an image's placeholders nor
    the ``boi``/``eoi`` around them) replaced by drawn special ids, in half the examples."""
    if not specials or not data.draw(st.booleans(), label="special ids in the prompt"):
        return prompt
    ids = prompt.input_ids.clone()
    for row in range(ids.shape[0]):
        text = prompt.text_positions(row)
        chosen = data.draw(st.lists(st.sampled_from(text), max_size=3, unique=True), label="where") if text else []
        for position in chosen:
            ids[row, position] = data.draw(st.sampled_from(specials), label="special id")
    return dataclasses.replace(prompt, input_ids=ids)
