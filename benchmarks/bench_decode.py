"""Per-token decode: ring layout vs max_seq layout vs HF, E2B geometry, side by side in one run.

For each ``(max_seq, prompt)`` pair the prompt is prefilled once per side (ours in chunks of 512); then decode
steps alternate between the three (ring, full, HF's own ``DynamicCache`` step as ``generate`` runs
it), so all see the same machine load, and the median step time of each is printed with the ratios.
The CPU side of one ring step (masks, RoPE rows, slot positions, the cache writes of the producing
layers) is timed on its own and reported as a share of the step.

    python benchmarks/bench_decode.py [--pairs 1024:256 2048:512 8192:512 8192:7680] [--steps 16]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from timing import machine

from gemma4_static.oracle.references.models import build_default_model
from gemma4_static.oracle.references.samples import text_prompt
from gemma4_static.runtime import StaticGemma4Runtime

CHUNK = 512


def _seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _cpu_side(runtime: StaticGemma4Runtime) -> float:
    """Seconds of the CPU work of one decode step, without the layers: masks, RoPE, slot positions
    and the producing layers' cache writes (at the step the runtime would take next)."""
    stack, cache = runtime.stack, runtime.cache
    positions = cache.lengths[:, None].clone()
    keep = torch.ones_like(positions, dtype=torch.bool)

    def work():
        stack.cache_masks(positions, cache.lengths + 1)
        stack.rope.lookup(positions, runtime.spec.dtype)
        plan = cache.write_plan(positions, keep)
        for layer, buffer in cache.keys.items():
            step = buffer[:, :, :1].clone()
            cache.write_planned(layer, step, step, plan)

    work()
    return statistics.median(_seconds(work) for _ in range(9))


def _interleaved_steps(model, runtimes: dict, hf_cache, steps: int) -> dict[str, list[float]]:
    """Seconds per decode step of each runtime and of HF, alternating step by step."""
    token = torch.full((1, 1), 7)
    times: dict[str, list[float]] = {name: [] for name in (*runtimes, "HF")}
    for _ in range(steps):
        for layout, runtime in runtimes.items():
            times[layout].append(_seconds(lambda runtime=runtime: runtime.decode_one(token)))
        times["HF"].append(_seconds(lambda: model(input_ids=token, cache=hf_cache, use_cache=True)))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", nargs="+", default=["1024:256", "2048:512", "8192:512", "8192:7680"])
    parser.add_argument("--steps", type=int, default=16)
    args = parser.parse_args()
    torch.set_grad_enabled(False)
    model = build_default_model("e2b-geometry")
    print(f"E2B geometry (2 query heads), batch 1, fp32; {machine()}")
    header = ("max_seq", "prompt", "ring ms", "full ms", "HF ms", "ring/full", "ring/HF", "CPU")
    print(" ".join(f"{name:>9}" for name in header))
    for max_seq, prompt_length in (map(int, pair.split(":")) for pair in args.pairs):
        prompt = text_prompt(model.config, [prompt_length])
        runtimes = {
            layout: StaticGemma4Runtime(model, max_seq=max_seq, prefill_chunk=CHUNK, sliding_cache=layout)
            for layout in ("ring", "full")
        }
        for runtime in runtimes.values():
            runtime.prefill(prompt.input_ids, prompt.attention_mask)
        hf_cache = model(**prompt.hf_kwargs(), use_cache=True).cache
        times = _interleaved_steps(model, runtimes, hf_cache, args.steps)
        ring, full, hf = (statistics.median(times[name][1:]) for name in ("ring", "full", "HF"))
        cpu = _cpu_side(runtimes["ring"]) / ring
        row = (max_seq, prompt_length, f"{ring * 1e3:.1f}", f"{full * 1e3:.1f}", f"{hf * 1e3:.1f}")
        print(" ".join(f"{value:>9}" for value in (*row, f"{ring / full:.2f}", f"{ring / hf:.2f}", f"{cpu:.0%}")))


if __name__ == "__main__":
    main()
