"""Prefill schedules: the chunk lengths a prompt is fed in, as a deployment's runner chooses them.

A schedule is a sequence of chunk lengths in order; its last length repeats until the prompt is
covered, and the chunk that reaches the prompt's end is cut there: ``(W + 1,)`` is "chunks of
``W + 1``", ``(1, W, 3)`` on a prompt of ``W + 10`` tokens is ``[1, W, 3, 3, 3]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def checked_schedule(schedule: Any, name: str = "schedule") -> tuple[int, ...]:
    """``schedule`` as a tuple of positive ints; ``TypeError``/``ValueError`` naming ``name`` otherwise."""
    if not isinstance(schedule, Sequence) or isinstance(schedule, str):
        raise TypeError(f"{name} must be a sequence of chunk lengths (positive ints), got {schedule!r}")
    if not schedule:
        raise ValueError(f"{name} must name at least one chunk length, got {schedule!r}")
    for chunk in schedule:
        if not isinstance(chunk, int) or isinstance(chunk, bool):
            raise TypeError(f"{name} must hold ints (chunk lengths), got {chunk!r} in {schedule!r}")
        if chunk < 1:
            raise ValueError(f"{name} must hold chunk lengths >= 1, got {chunk} in {schedule!r}")
    return tuple(schedule)


def expand_schedule(schedule: Sequence[int], length: int, name: str = "schedule") -> list[int]:
    """The chunk lengths of a prefill of ``length`` tokens under ``schedule`` (module docstring); they
    sum to ``length``."""
    chunks = checked_schedule(schedule, name)
    expanded, covered = [], 0
    while covered < length:
        chunk = chunks[min(len(expanded), len(chunks) - 1)]
        expanded.append(min(chunk, length - covered))
        covered += expanded[-1]
    return expanded


def chunk_starts(chunks: Sequence[int]) -> list[int]:
    """The first position of each chunk."""
    starts, position = [], 0
    for chunk in chunks:
        starts.append(position)
        position += chunk
    return starts
