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

from .metrics import ulp


@dataclass(frozen=True)
class Gate:
    """Thresholds of one profile: every stage output's SQNR and cosine similarity, and the token
    rule's bound ``margin_ulps`` (:mod:`.metrics`): the most a correct run of this profile moves a gap
    among the top logits, in ulps of ``dtype`` at the row's largest logit. Token checks (top-1, top-5,
    greedy tokens) count only decided rows and steps, and every decided one must agree."""

    dtype: torch.dtype
    sqnr_db: float
    cosine: float
    margin_ulps: float

    def token_bound(self, reference: torch.Tensor) -> torch.Tensor:
        """``(N,)`` the bound in logits for reference logits ``(N, vocab)``."""
        return self.margin_ulps * ulp(self.dtype, reference.double().abs().amax(dim=-1))


GATES = {
    # bf16 (8 mantissa bits): worst stage 27.1 dB (E2B prefill logits; HF bf16 20.1), layers
    # 29.0-34.7 dB.
    torch.bfloat16: Gate(torch.bfloat16, sqnr_db=20.0, cosine=0.995, margin_ulps=8.0),
    # fp16 (11 mantissa bits, 3 more than bf16, about 18 dB): worst stage 46.0 dB (E2B decode; HF
    # fp16 35.5), layers 46.6-52.4 dB.
    torch.float16: Gate(torch.float16, sqnr_db=40.0, cosine=0.99995, margin_ulps=14.0),
}

# A masked key's softmax weight must stay below this for every score the stage can produce: at
# 2^-24 (one fp32 ulp of 1.0) a masked key cannot move a float32-accumulated attention sum.
MASKED_WEIGHT_BOUND = 2.0**-24
