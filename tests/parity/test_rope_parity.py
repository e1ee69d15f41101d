"""RoPE tables vs HF's Gemma4TextRotaryEmbedding, per layer type and dtype."""

from __future__ import annotations

import pytest
import torch

from gemma4_static import build_rope
from gemma4_static.reference import hf_rope
from gemma4_static.verify import ROPE_POSITIONS, ROPE_TOLERANCE

# ROPE_TOLERANCE states and justifies the bound per dtype (fp32: 2 ulps at 1.0; bf16: one ulp).


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_rope_matches_hf(gemma4_model, dtype, report):
    config = gemma4_model.config
    position_ids = torch.stack([torch.arange(ROPE_POSITIONS), torch.arange(ROPE_POSITIONS).flip(0)])
    ours = build_rope(config, position_ids, dtype=dtype)
    theirs = hf_rope(config, position_ids, dtype=dtype)
    assert ours.keys() == theirs.keys()
    for name, (cos, sin) in ours.items():
        hf_cos, hf_sin = theirs[name]
        assert cos.shape == hf_cos.shape and cos.dtype == hf_cos.dtype == dtype
        error = max(float((cos - hf_cos).abs().max()), float((sin - hf_sin).abs().max()))
        report(f"RoPE {name} {dtype}: max |ours - HF| = {error:.3g} over positions 0..{ROPE_POSITIONS - 1}")
        assert error <= ROPE_TOLERANCE[dtype], name
