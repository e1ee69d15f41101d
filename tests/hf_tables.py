"""HF's scaled embedding (Gemma 4's token and per-layer tables) as HF's model made in a dtype holds
it: what the tests of a table kept in another dtype compare with."""

from __future__ import annotations

import torch
from transformers.models.gemma4.modeling_gemma4 import Gemma4TextScaledWordEmbedding


def hf_scaled_table(dtype: torch.dtype, weight: torch.Tensor, scale: float) -> Gemma4TextScaledWordEmbedding:
    """The table ``weight`` in ``dtype``, its scale the number set in ``dtype`` at init (HF builds a
    model under its dtype as the default, so ``sqrt(1536)`` is 39.25 in bfloat16, 39.19 in float32)."""
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        table = Gemma4TextScaledWordEmbedding(*weight.shape, padding_idx=0, embed_scale=scale)
    finally:
        torch.set_default_dtype(default)
    table.weight.data.copy_(weight.to(dtype))
    return table
