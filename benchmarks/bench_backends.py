"""Per-token decode and prefill: ExecuTorch backend vs PyTorch backend vs HF, E2B geometry, one run.

Both runtimes share the glue; the ExecuTorch one runs every stage as an XNNPACK-lowered program
(lowered during the warm-up, not timed). Decode steps alternate between the three sides (HF as its
own ``DynamicCache`` step), prefills likewise; medians and ratios are printed.

    python benchmarks/bench_backends.py [--max-seq 256] [--prompt 128] [--steps 12]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from gemma4_static.oracle.references.models import build_default_model
from gemma4_static.oracle.references.samples import text_prompt
from gemma4_static.runtime import StaticGemma4Runtime


def _seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-seq", type=int, default=256)
    parser.add_argument("--prompt", type=int, default=128)
    parser.add_argument("--steps", type=int, default=12)
    args = parser.parse_args()
    torch.set_grad_enabled(False)
    model = build_default_model("e2b-geometry")
    prompt = text_prompt(model.config, [args.prompt])
    runtimes = {b: StaticGemma4Runtime(model, max_seq=args.max_seq, backend=b) for b in ("executorch", "torch")}
    token = torch.full((1, 1), 7)
    for runtime in runtimes.values():  # warm-up: the ExecuTorch side lowers its programs here
        runtime.prefill(prompt.input_ids, prompt.attention_mask)
        runtime.decode_one(token)
    prefill = {name: [] for name in (*runtimes, "HF")}
    for _ in range(3):
        for name, runtime in runtimes.items():
            prefill[name].append(_seconds(lambda r=runtime: r.prefill(prompt.input_ids, prompt.attention_mask)))
        prefill["HF"].append(_seconds(lambda: model(**prompt.hf_kwargs(), use_cache=True)))
    cache = model(**prompt.hf_kwargs(), use_cache=True).cache
    decode = {name: [] for name in (*runtimes, "HF")}
    for _ in range(args.steps):
        for name, runtime in runtimes.items():
            decode[name].append(_seconds(lambda r=runtime: r.decode_one(token)))
        decode["HF"].append(_seconds(lambda: model(input_ids=token, cache=cache, use_cache=True)))
    print(f"E2B geometry (2 query heads), batch 1, fp32, max_seq {args.max_seq}, prompt {args.prompt}")
    for label, times in (("prefill", prefill), ("decode per token", decode)):
        et, pt, hf = (statistics.median(times[name]) * 1e3 for name in ("executorch", "torch", "HF"))
        print(f"{label:>17}: ExecuTorch {et:.1f} ms, PyTorch {pt:.1f} ms, HF {hf:.1f} ms", end="; ")
        print(f"ET/PT {et / pt:.2f}, ET/HF {et / hf:.2f}")


if __name__ == "__main__":
    main()
