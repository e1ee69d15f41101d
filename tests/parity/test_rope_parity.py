"""RoPE tables vs HF's Gemma4TextRotaryEmbedding, per layer type and dtype.

Tolerances (``tolerances.ROPE``): fp32 two ulps at 1.0, bf16 one bf16 ulp; the reasons are stated there.
"""

from __future__ import annotations

import pytest
import torch

from gemma4_static.oracle.checks import parity
from gemma4_static.oracle.results.report import assert_rows_pass
from gemma4_static.oracle.results.tolerances import ROPE_POSITIONS
from gemma4_static.ports.static import rope_of
from gemma4_static.spec import read_text_config


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_rope_matches_hf(gemma4_model, dtype, report):
    position_ids = torch.stack([torch.arange(ROPE_POSITIONS), torch.arange(ROPE_POSITIONS).flip(0)])
    rows = parity.rope_rows(gemma4_model.config, rope_of(gemma4_model.config), position_ids, dtype)
    assert len(rows) == len(read_text_config(gemma4_model.config).unique_layer_types)
    for row in rows:
        report(f"RoPE {row.check}: max |ours - HF| = {row.value:.3g} over positions 0..{ROPE_POSITIONS - 1}")
    assert_rows_pass(rows)
