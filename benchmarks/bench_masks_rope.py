"""Prefill masks + RoPE for the E2B geometry: gemma4-static vs HF, side by side in one run.

HF side: ``create_masks_for_generate`` under eager attention (materialised additive masks) plus
``Gemma4TextRotaryEmbedding`` for each layer type. Ours, two ways: ``PrefillMaskBuffers`` (what the
runtime prefills through: masks kept in buffers, rewritten where the padding changed) + the
runtime's ``RopeTables`` (built once), and the stateless ``build_prefill_masks`` (fresh tensors
every call) + ``build_rope`` (arguments validated, tables looked up, every call). Each call
gets the next prompt of a cycle of right-padded lengths (3/4, 1/2, 7/8, 1/4 of max_seq), so no call
repeats the padding of the one before. The three take turns; prints the median time
of each and the ratios ours/HF.

    python benchmarks/bench_masks_rope.py [--lengths 2048 8192] [--repeats 24]
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Callable

import torch
from timing import machine, medians_side_by_side
from transformers.masking_utils import create_masks_for_generate
from transformers.models.gemma4.modeling_gemma4 import Gemma4TextRotaryEmbedding

from gemma4_static import PrefillMaskBuffers, RopeTables, build_prefill_masks, build_rope
from gemma4_static.oracle.references.models import e2b_geometry_config

PROMPT_FRACTIONS = (3 / 4, 1 / 2, 7 / 8, 1 / 4)


def taking_turns(prompts: list[torch.Tensor], step: Callable[[torch.Tensor], object]) -> Callable[[], None]:
    """A call that runs ``step`` on the next prompt of the cycle each time."""
    cycle = itertools.cycle(prompts)
    return lambda: step(next(cycle))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[2048, 8192])
    parser.add_argument("--repeats", type=int, default=24)
    args = parser.parse_args()

    config = e2b_geometry_config()
    config._attn_implementation = "eager"
    rotary = Gemma4TextRotaryEmbedding(config)
    layer_types = sorted(set(config.layer_types))
    print(f"E2B geometry, batch 1, prompts of {', '.join(f'{f:g}' for f in PROMPT_FRACTIONS)} x max_seq in turn")
    print(machine())
    print(f"{'max_seq':>8} {'kept ms':>8} {'fresh ms':>9} {'HF ms':>8} {'kept/HF':>8} {'fresh/HF':>9}")
    for length in args.lengths:
        prompts = [(torch.arange(length) < int(fraction * length))[None] for fraction in PROMPT_FRACTIONS]
        positions = torch.arange(length)[None]
        embeds = torch.zeros(1, length, 1)
        buffers, tables = PrefillMaskBuffers(config, length), RopeTables(config, length)

        def kept(valid, buffers=buffers, tables=tables, positions=positions):
            buffers(valid)
            tables(positions)

        def fresh(valid, positions=positions):
            build_prefill_masks(config, valid)
            build_rope(config, positions)

        def hf(valid, positions=positions, embeds=embeds):
            create_masks_for_generate(config, embeds, valid, None, positions)
            for layer_type in layer_types:
                rotary(embeds, positions, layer_type)

        kept_s, fresh_s, hf_s = medians_side_by_side(
            tuple(taking_turns(prompts, step) for step in (kept, fresh, hf)), args.repeats
        )
        print(
            f"{length:>8} {kept_s * 1e3:>8.2f} {fresh_s * 1e3:>9.2f} {hf_s * 1e3:>8.2f} "
            f"{kept_s / hf_s:>8.3f} {fresh_s / hf_s:>9.3f}"
        )


if __name__ == "__main__":
    main()
