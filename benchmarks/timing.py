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
    """Median seconds of each, alternating calls so both see the same machine load.

    The first call of each is a warm-up (ours builds its cached tables then) and is not timed.
    """
    ours(), hf()
    ours_times, hf_times = [], []
    for _ in range(repeats):
        for fn, times in ((ours, ours_times), (hf, hf_times)):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
    return statistics.median(ours_times), statistics.median(hf_times)
