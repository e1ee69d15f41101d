"""Where ports break: prompt lengths and chunk lengths at and around the sliding window ``W``, the
port's longest chunk ``C`` and the ring's wrap, for the schedules grid and the fuzzer's strategies."""

from __future__ import annotations

from ...cpu.schedule import expand_schedule
from ...ports import PortLimits


def prompt_lengths(window: int, longest: int) -> list[int]:
    """1 token, either side of one and two windows, several windows (``3W + 2``, ``4W + 3``), up to
    ``longest`` (the longest prompt a run can take), in that order, without repeats."""
    lengths = [1, window - 1, window, window + 1, 2 * window, 2 * window + 1, 3 * window + 2, 4 * window + 3]
    return list(dict.fromkeys(length for length in lengths if 1 <= length <= longest))


def image_prompt_lengths(window: int, longest: int, prefix: int) -> list[int]:
    """Prompt lengths for prompts that open with ``prefix`` tokens of an image in a fixed profile: one
    text token after it, then :func:`prompt_lengths`' lengths past it (the window's edges are absolute
    positions) or, where the image spans all of them (a window far below it), those lengths counted
    after it; up to ``longest``. With no image (``prefix`` 0) they are :func:`prompt_lengths`'."""
    past = [length for length in prompt_lengths(window, longest) if length > prefix + 1]
    after = [prefix + length for length in prompt_lengths(window, longest - prefix) if length > 1]
    return [prefix + 1, *(past or after)] if prefix + 1 <= longest else []


def grid_prompt_lengths(window: int, prefix: int) -> list[int]:
    """The schedules grid's prompt lengths: every one of :func:`prompt_lengths` (up to ``4W + 3``
    text tokens), after ``prefix`` tokens of an image in the port's profile (0: none)."""
    return image_prompt_lengths(window, 4 * window + 3 + prefix, prefix)


def uneven_mix(window: int) -> tuple[int, ...]:
    """Chunks of different lengths in one prefill: ``1, W, 2, W + 1, 3`` (the last repeating)."""
    return (1, window, 2, window + 1, 3)


def chunk_schedules(window: int, longest_chunk: int) -> dict[str, tuple[int, ...] | None]:
    """The grid's schedules by name: one call (``None`` here: the prompt's own length), chunks of 1,
    ``W - 1``, ``W``, ``W + 1``, ``W + 2``, ``2W`` and the port's longest ``C``, the port's own policy
    (``"policy"``) and an uneven mix."""
    named: dict[str, tuple[int, ...] | None] = {"one call": None}
    for name, chunk in (
        ("chunks of 1", 1),
        ("chunks of W - 1", window - 1),
        ("chunks of W", window),
        ("chunks of W + 1", window + 1),
        ("chunks of W + 2", window + 2),
        ("chunks of 2W", 2 * window),
        ("chunks of C", longest_chunk),
    ):
        if chunk >= 1:
            named.setdefault(name, (chunk,))
    named["policy"] = None
    named["uneven mix"] = uneven_mix(window)
    return named


REACH = 8  # decode steps a grid case goes to reach the next ring wrap; beyond, it decodes SHORT steps
SHORT = 4


def decode_steps(length: int, window: int) -> int:
    """Decode steps after a prompt of ``length``: across the ring's next wrap (position ``p`` in slot
    ``p mod W``: the first decode of a prompt of ``kW`` tokens wraps at once), two steps past it, when
    it lies within :data:`REACH` steps (always on a small window); else :data:`SHORT` steps right after
    the prefill (the lengths next to multiples of ``W`` cross the wrap on any window)."""
    to_wrap = (window - length % window) % window
    return to_wrap + 2 if to_wrap <= REACH else SHORT


def accepted(limits: PortLimits, schedule: tuple[int, ...], length: int) -> list[int] | None:
    """The chunks ``schedule`` gives a prompt of ``length`` where ``limits`` accept them, else ``None``."""
    chunks = expand_schedule(schedule, length)
    return None if limits.chunks.refusal(chunks) else chunks
