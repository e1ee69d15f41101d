"""Per-token decode of the cache-in-program bundle (one ExecuTorch program, the KV cache inside it)
vs the PyTorch backend vs HF, batch 1, side by side in one run (E2B geometry by default).

For each ``max_seq`` the bundle is exported (its lowering time printed), the prompt (``max_seq / 2``
tokens) is prefilled on every side, then decode steps alternate between the three: the bundle's
``decode`` method with its CPU-side inputs built each step (masks, slots), the PyTorch runtime's
``decode_one``, and HF's own ``DynamicCache`` step. Medians and ratios are printed.

    python benchmarks/bench_bundle.py [--config e2b-geometry] [--max-seq 256 1024] [--steps 12]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch
from executorch.runtime import Runtime

from gemma4_static.bundle import export_bundle, prefill_logits, step_inputs
from gemma4_static.oracle.references.models import MODEL_NAMES, build_default_model
from gemma4_static.oracle.references.samples import text_prompt
from gemma4_static.runtime import StaticGemma4Runtime

CHUNK = 128


def _seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _row(model, max_seq: int, steps: int) -> tuple:
    """One ``max_seq``: lowering seconds and the median decode step of the bundle, PyTorch and HF."""
    prompt = text_prompt(model.config, [max_seq // 2])
    runtime = StaticGemma4Runtime(model, max_seq=max_seq)
    with tempfile.TemporaryDirectory() as folder:
        lowering = _seconds(lambda: export_bundle(runtime, folder, prefill_tokens=CHUNK))
        program = Runtime.get().load_program((Path(folder) / "model.pte").read_bytes())
    prefill, decode = program.load_method("prefill"), program.load_method("decode")
    inputs = runtime.build_inputs(prompt.input_ids, prompt.attention_mask)
    ours = prefill_logits(runtime, lambda *args: prefill.execute(list(args))[0], inputs, CHUNK)
    torch.testing.assert_close(ours, runtime.prefill(prompt.input_ids, prompt.attention_mask), rtol=0, atol=1e-3)
    cache = model(**prompt.hf_kwargs(), use_cache=True).cache
    token, position = torch.full((1, 1), 7), torch.tensor([[max_seq // 2]])

    def bundle_step() -> None:
        keep = torch.ones_like(position, dtype=torch.bool)
        decode.execute(list(step_inputs(runtime, token, position, keep)))
        position.add_(1)

    times: dict[str, list[float]] = {"bundle": [], "PyTorch": [], "HF": []}
    for _ in range(steps):
        times["bundle"].append(_seconds(bundle_step))
        times["PyTorch"].append(_seconds(lambda: runtime.decode_one(token)))
        times["HF"].append(_seconds(lambda: model(input_ids=token, cache=cache, use_cache=True)))
    return lowering, *(statistics.median(times[name][1:]) * 1e3 for name in ("bundle", "PyTorch", "HF"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-seq", type=int, nargs="+", default=[256, 1024])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--config", choices=MODEL_NAMES, default="e2b-geometry")
    args = parser.parse_args()
    torch.set_grad_enabled(False)
    model = build_default_model(args.config)
    print(f"{args.config}, batch 1, fp32, torch {torch.__version__}")
    header = ("max_seq", "prompt", "lower s", "bundle ms", "PyTorch ms", "HF ms", "ET/PT", "ET/HF")
    print(" ".join(f"{name:>10}" for name in header))
    for max_seq in args.max_seq:
        lowering, et, pt, hf = _row(model, max_seq, args.steps)
        row = (max_seq, max_seq // 2, f"{lowering:.0f}", f"{et:.1f}", f"{pt:.1f}", f"{hf:.1f}")
        print(" ".join(f"{value:>10}" for value in (*row, f"{et / pt:.2f}", f"{et / hf:.2f}")), flush=True)


if __name__ == "__main__":
    main()
