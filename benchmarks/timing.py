"""Side-by-side timing shared by the benchmark scripts."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch


def machine() -> str:
    """The CPU, its ATen kernels and torch's threads, for the line a benchmark's table stands under."""
    name = torch.cpu.get_capabilities().get("cpu_name", "unknown CPU")
    kernels = f"ATen {torch.backends.cpu.get_cpu_capability()}, {torch.get_num_threads()} threads"
    return f"{name}, {kernels}, torch {torch.__version__}"


def interleaved_medians(ours: Callable[[], object], hf: Callable[[], object], repeats: int) -> tuple[float, float]:
    """Median seconds of each, alternating calls so both see the same machine load (see
    :func:`medians_side_by_side`)."""
    ours_s, hf_s = medians_side_by_side((ours, hf), repeats)
    return ours_s, hf_s


def medians_side_by_side(calls: tuple[Callable[[], object], ...], repeats: int) -> list[float]:
    """Median seconds of each call, taking turns ``repeats`` times so all see the same machine load.

    The first call of each is a warm-up (ours builds its cached tables then) and is not timed.
    """
    for call in calls:
        call()
    times: list[list[float]] = [[] for _ in calls]
    for _ in range(repeats):
        for call, samples in zip(calls, times, strict=True):
            start = time.perf_counter()
            call()
            samples.append(time.perf_counter() - start)
    return [statistics.median(samples) for samples in times]
