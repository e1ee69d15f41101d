"""The gates of each low-precision profile: thresholds on :mod:`.metrics` against HF in float64,
asserted by ``verify --dtype`` and the tests, each with the measurement it comes from.

How they were derived: the default models (tiny with an image, batch 2; the E2B geometry with a
ragged 515/256-token prompt, 24 decode steps) were run in each dtype and every stage's metrics
recorded, ours and HF's own in the same dtype, both against float64 (table in the README). An SQNR
gate sits 6 dB (one bit of error amplitude) below the worst stage we measured, rounded down to a
multiple of 10 dB; a cosine gate is the cosine that SQNR implies (``1 - 10^(-SQNR/10) / 2``). A
real regression costs far more: a mask value of -1 or a dropped norm costs 20 dB and more, a
RoPE shift fails the K rows and the RoPE rows. Token agreement gates sit about 0.1 below the worst
measured agreement, where HF's own same-dtype agreement is lower still (random fixtures have small
top-2 margins, so greedy ties flip legitimately).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Gate:
    """Thresholds of one profile: every stage output's SQNR and cosine similarity; the prefill
    logits' top-1 agreement (every row); the decode steps' top-1 agreement; top-5 overlap; the
    matched prefix of greedy tokens (``None``: reported, not gated)."""

    sqnr_db: float
    cosine: float
    top1: float
    decode_top1: float
    top5: float
    matched_prefix: int | None


GATES = {
    # bf16 (8 mantissa bits): worst stage 27.1 dB (E2B prefill logits; HF bf16 20.1), layers
    # 29.0-34.7 dB. Decode top-1 worst 0.90 (HF 0.83), top-5 0.95. Greedy tokens: HF bf16 itself
    # matches float64 on 0 tokens of E2B, ours on 1: not gated, reported.
    torch.bfloat16: Gate(sqnr_db=20.0, cosine=0.995, top1=1.0, decode_top1=0.8, top5=0.8, matched_prefix=None),
    # fp16 (11 mantissa bits, 3 more than bf16, about 18 dB): worst stage 46.0 dB (E2B decode; HF
    # fp16 35.5), layers 46.6-52.4 dB. Decode top-1 worst 0.98 (HF 0.96), top-5 0.996. Greedy
    # tokens: ours matched every one (15 of 15, 24 of 24; HF fp16 11 and 21): gate 8.
    torch.float16: Gate(sqnr_db=40.0, cosine=0.99995, top1=1.0, decode_top1=0.9, top5=0.95, matched_prefix=8),
}

# A masked key's softmax weight must stay below this for every score the stage can produce: at
# 2^-24 (one fp32 ulp of 1.0) a masked key cannot move a float32-accumulated attention sum.
MASKED_WEIGHT_BOUND = 2.0**-24
