"""RoPE tables vs HF's Gemma4TextRotaryEmbedding, per layer type and dtype."""

from __future__ import annotations

import pytest
import torch

from gemma4_static import build_rope
from gemma4_static.reference import hf_rope

# Both sides compute the same fp32 products position * inv_freq and the same cos/sin kernels, so
# fp32 agrees to the last bit in practice; the tolerance leaves two fp32 ulps at 1.0 for a libm that
# rounds differently. bf16 casts those fp32 values once: a one-ulp fp32 difference at a rounding
# boundary flips at most one bf16 ulp, 2**-8 for values in [0.5, 1).
TOLERANCE = {torch.float32: 2.5e-7, torch.bfloat16: 2.0**-8}
MAX_POSITION = 4100  # past 4096, as the E2B context is used in practice


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_rope_matches_hf(gemma4_model, dtype, report):
    config = gemma4_model.config
    position_ids = torch.stack([torch.arange(MAX_POSITION), torch.arange(MAX_POSITION).flip(0)])
    ours = build_rope(config, position_ids, dtype=dtype)
    theirs = hf_rope(config, position_ids, dtype=dtype)
    assert ours.keys() == theirs.keys()
    for name, (cos, sin) in ours.items():
        hf_cos, hf_sin = theirs[name]
        assert cos.shape == hf_cos.shape and cos.dtype == hf_cos.dtype == dtype
        error = max(float((cos - hf_cos).abs().max()), float((sin - hf_sin).abs().max()))
        report(f"RoPE {name} {dtype}: max |ours - HF| = {error:.3g} over positions 0..{MAX_POSITION - 1}")
        assert error <= TOLERANCE[dtype], name
