"""This runtime's embedding stage over a table kept in another dtype than it computes in (a
checkpoint's bfloat16 per-layer-embedding table in the float32 profile, read row-wise) against HF's
scaled embedding made in the profile's dtype: equal to the bit, since bfloat16 is exact in float32
and the scale is the number in float32. E2B's widths are used: their square roots are not exact in
bfloat16 (sqrt(1536) is 39.25 there), which the embedded models' 64 and 16 are."""

from __future__ import annotations

import pytest
import torch

from gemma4_static.npu.embedding import TokenEmbedding
from tests.hf_tables import hf_scaled_table


@pytest.mark.parametrize("width", [1536, 256])  # E2B's hidden size and per-layer input size
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_stored_table_read_in_the_profiles_dtype_is_hfs_table_in_that_dtype(width, dtype):
    stored = torch.randn(64, width).to(torch.bfloat16)
    ours = TokenEmbedding(stored, width**0.5, dtype)
    theirs = hf_scaled_table(dtype, stored, width**0.5)
    ids = torch.tensor([[1, 5, 63, 0], [7, 7, 2, 40]])
    with torch.no_grad():
        mine, expected = ours(ids), theirs(ids)
    assert mine.dtype == expected.dtype == dtype
    assert torch.equal(mine, expected)  # a row lookup, one product with the same scale: no rounding differs
