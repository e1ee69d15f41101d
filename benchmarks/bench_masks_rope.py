"""Prefill masks + RoPE for the E2B geometry: gemma4-static vs HF, side by side in one run.

HF side: ``create_masks_for_generate`` under eager attention (materialised additive masks) plus
``Gemma4TextRotaryEmbedding`` for each layer type. Ours: ``build_prefill_masks`` + ``build_rope``
after a first call (cached tables reused). Calls alternate between the two; prints the median
time of each and the ratio ours/HF.

    python benchmarks/bench_masks_rope.py [--lengths 2048 8192] [--repeats 25]
"""

from __future__ import annotations

import argparse

import torch
from timing import interleaved_medians, machine
from transformers.masking_utils import create_masks_for_generate
from transformers.models.gemma4.modeling_gemma4 import Gemma4TextRotaryEmbedding

from gemma4_static import build_prefill_masks, build_rope
from gemma4_static.oracle.references.models import e2b_geometry_config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[2048, 8192])
    parser.add_argument("--repeats", type=int, default=25)
    args = parser.parse_args()

    config = e2b_geometry_config()
    config._attn_implementation = "eager"
    rotary = Gemma4TextRotaryEmbedding(config)
    layer_types = sorted(set(config.layer_types))
    print(f"E2B geometry, batch 1, prompt = 3/4 of max_seq (right padding); {machine()}")
    print(f"{'max_seq':>8} {'ours ms':>9} {'HF ms':>9} {'ours/HF':>8}")
    for length in args.lengths:
        valid = torch.zeros(1, length, dtype=torch.bool)
        valid[:, : 3 * length // 4] = True
        positions = torch.arange(length)[None]
        embeds = torch.zeros(1, length, 1)

        def ours(valid=valid, positions=positions):
            build_prefill_masks(config, valid)
            build_rope(config, positions)

        def hf(valid=valid, positions=positions, embeds=embeds):
            create_masks_for_generate(config, embeds, valid, None, positions)
            for layer_type in layer_types:
                rotary(embeds, positions, layer_type)

        ours_s, hf_s = interleaved_medians(ours, hf, args.repeats)
        print(f"{length:>8} {ours_s * 1e3:>9.2f} {hf_s * 1e3:>9.2f} {ours_s / hf_s:>8.3f}")


if __name__ == "__main__":
    main()
