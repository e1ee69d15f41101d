"""Prefill and per-token decode on ExecuTorch vs the PyTorch backend vs HF, batch 1, side by side in
one run (E2B geometry by default), with each ExecuTorch form's lowering time and program count.

``executorch`` is the runtime's default ExecuTorch form (the text model as one program, the KV cache
inside it: CPU-side masks and slots, then the program's ``prefill``/``decode`` method);
``executorch-stages`` (``--with-stages``) runs every stage as its own program with the cache passed
in and out. For each ``max_seq`` a runtime of each backend prefills a prompt of ``max_seq / 2``
tokens (the ExecuTorch runtimes lower their programs on that warm-up: timed as "lowering"); then
prefills, and decode steps, alternate between the sides (HF as its own ``DynamicCache`` step), so
all see the same machine load. Medians and ratios are printed.

    python benchmarks/bench_backends.py [--config e2b-geometry] [--max-seq 256 1024] [--steps 12] [--with-stages]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from gemma4_static.oracle.references.models import MODEL_NAMES, build_default_model
from gemma4_static.oracle.references.samples import text_prompt
from gemma4_static.runtime import StaticGemma4Runtime


def _seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _programs(runtime: StaticGemma4Runtime) -> str:
    """How many programs the runtime's ExecuTorch side lowered (and their methods)."""
    if runtime.program is not None:
        return f"1 ({len(runtime.program.methods())} methods, {runtime.program.size() / 2**20:.0f} MB)"
    stages = (runtime.stages.embedding, runtime.stages.per_layer_inputs, *runtime.stages.layers, runtime.stages.lm_head)
    return str(sum(len(stage.programs()) for stage in stages if hasattr(stage, "programs")))


def _measure(model, max_seq: int, backends: tuple[str, ...], steps: int) -> None:
    prompt = text_prompt(model.config, [max_seq // 2])
    runtimes = {backend: StaticGemma4Runtime(model, max_seq=max_seq, backend=backend) for backend in backends}
    token = torch.full((1, 1), 7)
    lowering = {}
    for name, runtime in runtimes.items():  # warm-up: the ExecuTorch sides lower their programs here
        lowering[name] = _seconds(
            lambda r=runtime: (r.prefill(prompt.input_ids, prompt.attention_mask), r.decode_one(token))
        )
    prefill = {name: [] for name in (*runtimes, "HF")}
    for _ in range(3):
        for name, runtime in runtimes.items():
            prefill[name].append(_seconds(lambda r=runtime: r.prefill(prompt.input_ids, prompt.attention_mask)))
        prefill["HF"].append(_seconds(lambda: model(**prompt.hf_kwargs(), use_cache=True)))
    cache = model(**prompt.hf_kwargs(), use_cache=True).cache
    decode = {name: [] for name in (*runtimes, "HF")}
    for _ in range(steps):
        for name, runtime in runtimes.items():
            decode[name].append(_seconds(lambda r=runtime: r.decode_one(token)))
        decode["HF"].append(_seconds(lambda: model(input_ids=token, cache=cache, use_cache=True)))
    print(f"max_seq {max_seq}, prompt {max_seq // 2}")
    for label, times in (("prefill", prefill), ("decode per token", decode)):
        ms = {name: statistics.median(values) * 1e3 for name, values in times.items()}
        for name in (*runtimes, "HF"):
            ratios = f"/PyTorch {ms[name] / ms['torch']:.2f}, /HF {ms[name] / ms['HF']:.2f}"
            print(f"  {label:>16} {name:>17}: {ms[name]:8.1f} ms  ({ratios})")
    for name, runtime in runtimes.items():
        if name != "torch":
            print(f"  {name}: lowering {lowering[name]:.0f} s (warm-up), programs {_programs(runtime)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", choices=MODEL_NAMES, default="e2b-geometry")
    parser.add_argument("--max-seq", type=int, nargs="+", default=[256, 1024])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--with-stages", action="store_true", help="also the program-per-stage form")
    args = parser.parse_args()
    torch.set_grad_enabled(False)
    model = build_default_model(args.config)
    backends = ("executorch", *(("executorch-stages",) if args.with_stages else ()), "torch")
    print(f"{args.config}, batch 1, fp32, torch {torch.__version__}")
    for max_seq in args.max_seq:
        _measure(model, max_seq, backends, args.steps)


if __name__ == "__main__":
    main()
