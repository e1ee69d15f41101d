"""Per-token decode time: static runtime vs HF ``generate``, E2B geometry, side by side in one run.

Both sides generate greedily from the same prompt; the per-token time is
``(t(new_tokens) - t(1)) / (new_tokens - 1)``, which removes the prefill from both. The static
path attends over all ``max_seq`` slots at every step; HF's cache grows with the text.

    python benchmarks/bench_decode.py [--max-seq 1024] [--prompt 512] [--new-tokens 33] [--repeats 3]
"""

from __future__ import annotations

import argparse

import torch
from timing import interleaved_medians
from transformers import GenerationConfig

from gemma4_static.oracle.models import build_default_model
from gemma4_static.oracle.samples import text_prompt
from gemma4_static.runtime import StaticGemma4Runtime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-seq", type=int, default=1024)
    parser.add_argument("--prompt", type=int, default=512)
    parser.add_argument("--new-tokens", type=int, default=33)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    model = build_default_model("e2b-geometry")
    runtime = StaticGemma4Runtime(model, max_seq=args.max_seq)
    prompt = text_prompt(model.config, [args.prompt])

    def timings(new_tokens: int) -> tuple[float, float]:
        config = GenerationConfig(do_sample=False, max_new_tokens=new_tokens, eos_token_id=None, pad_token_id=0)

        def ours():
            runtime.generate(prompt.input_ids, prompt.attention_mask, max_new_tokens=new_tokens)

        def hf():
            with torch.no_grad():
                model.generate(**prompt.hf_kwargs(), generation_config=config)

        return interleaved_medians(ours, hf, args.repeats)

    ours_one, hf_one = timings(1)
    ours_many, hf_many = timings(args.new_tokens)
    steps = args.new_tokens - 1
    ours_token, hf_token = (ours_many - ours_one) / steps, (hf_many - hf_one) / steps
    print(f"E2B geometry, batch 1, prompt {args.prompt}, max_seq {args.max_seq}, torch {torch.__version__}")
    ratio = ours_token / hf_token
    print(f"per-token decode: ours {ours_token * 1e3:.1f} ms, HF generate {hf_token * 1e3:.1f} ms, ours/HF {ratio:.3f}")


if __name__ == "__main__":
    main()
