"""Every tolerance the parity checks apply, in one table, each with the reason it is right.

Stage outputs are compared as ``max |ours - HF| <= RELATIVE[dtype] * max(1, max |HF|)`` in
float32; the low-precision profiles are gated on metrics against float64 instead (:mod:`..numerics.gates`).
"""

from __future__ import annotations

import torch

# Stage outputs (hidden states, K/V, PLE, logits, decode steps). fp32: each stage repeats HF's op
# sequence and only summation orders differ (BLAS blocking on padded shapes, SDPA kernels), a few
# ulps per layer: ~2e-6 observed through 35 E2B layers, 2e-5 allowed.
RELATIVE = {torch.float32: 2e-5}

# RoPE. Both sides compute the same fp32 products position * inv_freq and the same cos/sin kernels,
# so fp32 agrees to the last bit in practice; the bound leaves two fp32 ulps at 1.0 for a libm that
# rounds differently. bf16 and fp16 cast those fp32 values once: a one-ulp fp32 difference at a
# rounding boundary flips at most one ulp of the target type, 2**-8 (bf16) and 2**-11 (fp16) for
# values in [0.5, 1).
ROPE = {torch.float32: 2.5e-7, torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}
ROPE_POSITIONS = 4100  # past 4096, as long E2B contexts are used in practice

# An exported graph replays the same aten ops on the same inputs: fp32 results agree to within
# reassociation noise of its decompositions (observed: 0).
EXPORT_RELATIVE = 1e-6

# Exact: both sides run the same op on the same input (static inputs, embedding lookup, fusion by
# slicing vs masked_scatter, boolean masks, generated tokens).
EXACT = 0.0


def token_bound(reference: torch.Tensor) -> float:
    """The token rule's gap bound in float32 (:mod:`..numerics.metrics`): the logits rows hold every logit of
    ``reference (..., vocab)`` (HF float32) to :func:`relative`, so a gap between two moves by at most
    twice that; a wider top-2 gap is decided. Steps HF never computed (NaN after EOS) are skipped."""
    return 2 * relative(torch.float32, torch.nan_to_num(reference, nan=0.0))


def scaled(factor: float, reference: torch.Tensor) -> float:
    """``factor * max(1, max |reference|)``: an absolute bound for values of ``reference``'s magnitude."""
    return factor * max(1.0, float(reference.float().abs().max())) if reference.numel() else factor


def relative(dtype: torch.dtype, reference: torch.Tensor) -> float:
    """The tolerance of a stage output in ``dtype`` against HF's ``reference``."""
    return scaled(RELATIVE[dtype], reference)
