"""What the static mixture-of-experts form costs against HF's dynamic dispatch, side by side in one run.

The same block inputs through this runtime's MoE stage (every expert on every token, weighted by a
dense routing matrix: one shape for any routing) and through HF's ``Gemma4TextRouter`` +
``Gemma4TextExperts`` (a loop over the experts some token picked, each on its tokens only), at the
26B-A4B geometry fixture (hidden 64, expert width 32) and at one layer of the released 26B-A4B
widths (hidden 2816, 128 experts of width 704, top 8), for a decode step and prompts of 32 and 128
tokens. Prints the median of each and the ratio (the expected compute ratio is E / k = 16).

    python benchmarks/bench_moe.py [--repeats 7]
"""

from __future__ import annotations

import argparse
from functools import partial

import torch
from timing import interleaved_medians
from transformers import Gemma4TextConfig
from transformers.models.gemma4.modeling_gemma4 import Gemma4TextDecoderLayer

from gemma4_static.npu.experts import MixtureOfExperts
from gemma4_static.oracle.references.family import geometry_config
from gemma4_static.oracle.references.trained import _make_router_decide
from gemma4_static.spec.model import _expert_weights

RELEASED_WIDTHS = {
    "hidden_size": 2816,
    "intermediate_size": 2112,
    "moe_intermediate_size": 704,
    "num_experts": 128,
    "top_k_experts": 8,
    "enable_moe_block": True,
    "num_hidden_layers": 1,
    "layer_types": ["full_attention"],
    "global_head_dim": 64,
    "num_attention_heads": 1,
    "num_key_value_heads": 1,
    "head_dim": 64,
    "vocab_size": 16,
    "hidden_size_per_layer_input": 0,
}


def _layer(config: Gemma4TextConfig) -> Gemma4TextDecoderLayer:
    torch.manual_seed(0)
    layer = Gemma4TextDecoderLayer(config, 0).eval()
    for parameter in (layer.experts.gate_up_proj, layer.experts.down_proj):
        parameter.data.normal_(0.0, 0.02)
    _make_router_decide(layer.router, torch.Generator().manual_seed(0))
    return layer


@torch.no_grad()
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"{'MoE block of':<44} {'static ms':>10} {'HF ms':>10} {'ratio':>7}")
    for label, config in (
        ("26b-a4b-geometry fixture", geometry_config("26b-a4b-geometry")),
        ("26B-A4B released widths, one layer", Gemma4TextConfig(**RELEASED_WIDTHS)),
    ):
        layer = _layer(config)
        ours = MixtureOfExperts(_expert_weights(layer), config.rms_norm_eps)
        for tokens in (1, 32, 128):
            residual = torch.randn(1, tokens, config.hidden_size, generator=torch.Generator().manual_seed(tokens))
            dense = torch.randn(1, tokens, config.hidden_size, generator=torch.Generator().manual_seed(tokens + 1))

            def hf(residual=residual, dense=dense, layer=layer):
                flat = residual.reshape(-1, residual.shape[-1])
                _, weights, index = layer.router(flat)
                experts = layer.experts(layer.pre_feedforward_layernorm_2(flat), index, weights)
                experts = layer.post_feedforward_layernorm_2(experts.reshape(residual.shape))
                return layer.post_feedforward_layernorm_1(dense) + experts

            static, dynamic = interleaved_medians(partial(ours, dense, residual), hf, args.repeats)
            torch.testing.assert_close(ours(dense, residual), hf(), rtol=1e-4, atol=1e-4)
            print(f"{label + f', {tokens} tokens':<44} {static * 1e3:>10.2f} {dynamic * 1e3:>10.2f} "
                  f"{static / dynamic:>7.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
