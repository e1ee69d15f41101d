"""The low-precision profiles' metrics on the default models, as the README's tables.

Runs ``verify``'s dtype-dependent checks for each model and profile (ours and HF in the same dtype,
both against HF in float64) and prints, per stage kind, the worst SQNR and cosine, the logits'
top-1 / top-5 agreement and the greedy matched prefix; then the fp16 headroom of every stage and
layer (``65504 / max |activation|`` over prefill, decode and generation).

    python benchmarks/numerics_table.py [--models tiny e2b-geometry]
"""

from __future__ import annotations

import argparse

import torch

from gemma4_static.oracle.gates import GATES
from gemma4_static.oracle.models import build_default_model
from gemma4_static.oracle.verify import run_verification

CHECKS = ("inputs", "mask-value", "layers", "decode", "overflow")
KINDS = ("token embedding", "PLE", "vision prefill", "decoder layers", "KV cache", "prefill logits", "decode steps")


def _worst(rows, stage: str, metric: str) -> str:
    chosen = [row for row in rows if row.stage == stage and row.metric == metric]
    if not chosen:
        return "-"
    row = min(chosen, key=lambda row: row.value)
    return f"{row.value:.4g} \\| {row.hf:.4g}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["tiny", "e2b-geometry"])
    args = parser.parse_args()
    headroom: dict[str, dict[str, float]] = {}
    print("| model | profile | stage | SQNR dB | cosine | top-1 | top-5 |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name in args.models:
        model = build_default_model(name)
        for dtype in GATES:
            rows = run_verification(model, dtype=dtype, export=False, checks=CHECKS)
            label = str(dtype).removeprefix("torch.")
            for stage in KINDS:
                if not any(row.stage == stage for row in rows):
                    continue
                cells = [
                    _worst(rows, stage, metric)
                    for metric in ("SQNR dB", "cosine", "top-1 agreement", "top-5 agreement")
                ]
                print(f"| {name} | {label} | {stage} | " + " | ".join(cells) + " |")
            prefix = _worst(rows, "generation", "matched prefix")
            print(f"| {name} | {label} | greedy tokens: matched prefix {prefix} | | | | |")
            if dtype == torch.float16:
                headroom[name] = {
                    row.check.split(",")[0]: row.tolerance / row.value for row in rows if row.stage == "overflow"
                }
    print("\n| model | stage or layer (largest sub-stage) | headroom |")
    print("| --- | --- | --- |")
    for name, groups in headroom.items():
        for group, factor in groups.items():
            print(f"| {name} | {group} | {factor:.3g}x |")


if __name__ == "__main__":
    main()
