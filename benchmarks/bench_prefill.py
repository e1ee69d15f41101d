"""Static prefill vs HF's forward on the same inputs, E2B geometry, side by side in one run.

Ours: ``StaticGemma4Runtime.prefill`` (pads to ``max_seq``, builds masks and RoPE, runs every
stage, writes the static cache). HF: ``model(input_ids, attention_mask, use_cache=True)`` on the
unpadded prompt (its default SDPA attention). Prints median times and the ratio ours/HF for a
prompt equal to ``max_seq`` and for a shorter one (where the static path still pays for ``max_seq``).

    python benchmarks/bench_prefill.py [--max-seq 1024] [--repeats 5]
"""

from __future__ import annotations

import argparse

import torch
from timing import interleaved_medians

from gemma4_static.oracle.references.models import build_default_model
from gemma4_static.oracle.references.samples import text_prompt
from gemma4_static.runtime import StaticGemma4Runtime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-seq", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    model = build_default_model("e2b-geometry")
    runtime = StaticGemma4Runtime(model, max_seq=args.max_seq)
    print(f"E2B geometry (35 layers, 2 query heads), batch 1, max_seq {args.max_seq}, torch {torch.__version__}")
    print(f"{'prompt':>7} {'ours s':>8} {'HF s':>8} {'ours/HF':>8}")
    for length in (args.max_seq, 3 * args.max_seq // 4):
        prompt = text_prompt(model.config, [length])

        def ours(prompt=prompt):
            runtime.prefill(prompt.input_ids, prompt.attention_mask)

        def hf(prompt=prompt):
            with torch.no_grad():
                model(input_ids=prompt.input_ids, attention_mask=prompt.attention_mask, use_cache=True)

        ours_s, hf_s = interleaved_medians(ours, hf, args.repeats)
        print(f"{length:>7} {ours_s:>8.3f} {hf_s:>8.3f} {ours_s / hf_s:>8.3f}")


if __name__ == "__main__":
    main()
