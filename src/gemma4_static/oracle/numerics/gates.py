"""The gates of each low-precision profile (bf16, fp16 and the integer schemes): thresholds on
:mod:`.metrics` against HF in float64, asserted by ``verify --dtype`` / ``--quant`` and the tests,
each with the measurement it comes from.

How they were derived: the default models (tiny and e2b-vision with an image, batch 2; the E2B
geometry with a ragged 515/256-token prompt, 24 decode steps) were run in each dtype and every
stage's metrics recorded, ours and HF's own in the same dtype, both against float64 (table in
docs/profiles.md). An SQNR gate sits 6 dB (one bit of error amplitude) below the worst stage we
measured on the 515-token sample, rounded down to a multiple of 10 dB (longer prompts measured since stay
above it: see the chunked prefill below); a cosine gate is the cosine that SQNR implies
(``1 - 10^(-SQNR/10) / 2``). A real regression costs far more: a mask value of -1 or a dropped norm
costs 20 dB and more, a RoPE shift fails the K rows and the RoPE rows.

Token checks follow the token rule of :mod:`.metrics`: a top-1, top-5 or greedy-token disagreement
counts only where the float64 gap exceeds ``margin`` ulps of the dtype at the row's largest
logit, and there every one must agree. ``margin`` is twice (one bit) the largest margin shift
of ours over every prefill position and decode step of the three default models, under each kernel
set of :mod:`.kernel_sets` (native AVX-512 with bf16, AVX-512 without, AVX2, no vector extension)
with 1 and 2 threads (``python benchmarks/token_bounds.py``); the thread count changed nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...backends import backend_named
from .metrics import ulp


@dataclass(frozen=True)
class Gate:
    """Thresholds of one profile: every stage output's SQNR and cosine similarity, and the token
    rule's bound ``margin`` (:mod:`.metrics`): the most a correct run of this profile moves a gap
    among the top logits, in ulps of ``dtype`` at the row's largest logit (a float profile) or in
    logits (``dtype`` ``None``: an integer profile, whose error scales with no float format). Token
    checks (top-1, top-5, greedy tokens) count only decided rows and steps, and every decided one
    must agree."""

    dtype: torch.dtype | None
    sqnr_db: float
    cosine: float
    margin: float
    stage_sqnr_db: tuple[tuple[str, float], ...] = ()  # (stage, SQNR gate) where one stage has its own
    # how far ours may fall below HF's own SQNR when HF runs the same scheme (None: not gated)
    hf_deficit_db: float | None = None

    def sqnr_gate(self, stage: str) -> float:
        """The SQNR gate of ``stage``: its own where it has one, else the profile's."""
        return dict(self.stage_sqnr_db).get(stage, self.sqnr_db)

    def cosine_gate(self, stage: str) -> float:
        """The cosine gate of ``stage``: the one its own SQNR gate implies (``1 - 10^(-SQNR/10) / 2``),
        else the profile's."""
        own = dict(self.stage_sqnr_db).get(stage)
        return self.cosine if own is None else 1 - 10 ** (-own / 10) / 2

    @property
    def unit(self) -> str:
        return "logits" if self.dtype is None else "ulps"

    @property
    def bound_text(self) -> str:
        return f"{self.margin:g} {self.unit}"

    def units(self, reference: torch.Tensor) -> torch.Tensor:
        """``(N,)`` the unit of ``margin`` at each row of ``reference (N, vocab)``: one ulp of ``dtype``
        at the row's largest ``|logit|``, or 1 (one logit) for an integer profile."""
        largest = reference.double().abs().amax(dim=-1)
        return torch.ones_like(largest) if self.dtype is None else ulp(self.dtype, largest)

    def token_bound(self, reference: torch.Tensor) -> torch.Tensor:
        """``(N,)`` the bound in logits for reference logits ``(N, vocab)``."""
        return self.margin * self.units(reference)


GATES = {
    # bf16 (8 mantissa bits): worst stage 27.3 dB (E2B prefill logits; HF bf16 20.4), layers
    # 29.0-34.7 dB; the chunked prefill of a 1027-token prompt 25.4-27.3 dB over the kernel sets
    # (the narrowest margin; the error grows with position). Margin shift: worst 12.84 ulps (E2B
    # prefill, AVX2 kernels; 0.125 a ulp at logits in [16, 32), so 26 ulps are 3.25 logits); HF
    # bf16 reaches 52 (its RoPE inv_freq in bf16).
    torch.bfloat16: Gate(torch.bfloat16, sqnr_db=20.0, cosine=0.995, margin=26.0),
    # fp16 (11 mantissa bits, 3 more than bf16, about 18 dB): worst stage 46.0 dB (E2B decode; HF
    # fp16 35.5), layers 46.6-52.4 dB; the chunked prefill of a 1027-token prompt 43.2-43.8 dB over
    # the kernel sets (single shot on that prompt: 42.8; the narrowest margin, 3.2 dB). Margin
    # shift: worst 15.09 ulps (E2B prefill, every kernel set; 2^-6 a ulp at [16, 32), so 31 ulps
    # are 0.48 logits); HF fp16 reaches 94.
    torch.float16: Gate(torch.float16, sqnr_db=40.0, cosine=0.99995, margin=31.0),
}


# the stages an integer profile gates one by one, in the order :func:`_integer_gate` takes their SQNR gates
GATED_STAGES = (
    "token embedding",
    "PLE",
    "vision prefill",
    "decoder layers",
    "KV cache",
    "prefill logits",
    "chunked prefill",
    "decode steps",
)


def _integer_gate(sqnr_db: tuple[float | None, ...], margin: float, hf_deficit_db: float | None) -> Gate:
    """An integer profile's gate: an SQNR gate per stage of :data:`GATED_STAGES` (the cosine each
    implies; ``None``: a stage not measured in this profile) and the deficit bound against HF; the
    profile-wide figures, for a stage without its own, are the lowest of them."""
    floor = min(gate for gate in sqnr_db if gate is not None)
    stages = tuple((stage, gate) for stage, gate in zip(GATED_STAGES, sqnr_db, strict=True) if gate is not None)
    return Gate(None, floor, 1 - 10 ** (-floor / 10) / 2, margin, stage_sqnr_db=stages, hf_deficit_db=hf_deficit_db)


# Integer profiles (:mod:`gemma4_static.quant`), keyed by scheme name, one gate per base scheme
# (with and without +e8+h8). Measured on tiny, e2b-vision (image prompt, batch 2) and the E2B geometry
# (515/256-token prompt, 24 decode steps), both variants of each base (``python
# benchmarks/numerics_table.py --models tiny e2b-vision e2b-geometry --quant ...``; table in docs/profiles.md).
# The stages' errors differ by 20 dB and more (a 16-bit PLE path near 40 dB, the layers near 25),
# so each stage has its own SQNR gate: 6 dB below the worst of that stage over the models and both
# variants, rounded down to 1 dB (a single gate at the layers' level would let every fault of the PLE
# path or the vision tower through). HF quantized in the same scheme (its own calibration) lands
# within 1 dB of ours on a16w8 and a16w4 and within 3.2 dB either way on a8w8 (its int8 ranges round
# differently). That makes HF's figure a second, sharper gate: a stage may fall at most
# ``hf_deficit_db`` below HF's own SQNR, the worst deficit measured plus 3 dB (a16w8: 0.1 dB measured,
# bound 3; a8w8: 3.1, bound 6; a16w4: 0.1, bound 3). A bug whose own error hides in the scheme's noise
# still shows against HF in the same noise (q-norm-after-rope on the tiny model: 22.5 dB at the logits
# alone, inside a16w8's 27.8 dB budget, but 6.8 dB below HF's a16w8). Margins are in logits: twice
# the worst margin shift of ours (CPU kernel sets move these by about 1e-5 logits, nothing beside
# the scheme's noise).
QUANT_GATES = {
    # a16w8: worst 23.3 dB prefill logits (E2B, +e8+h8), 23.7 layers (e2b-vision), 15.8 chunked
    # prefill (tiny: its 2W+3-token prompt leaves the calibrated ranges), PLE 37.6, vision 38.3,
    # embedding 44.0 (+e8); margin shift 3.42 logits (E2B prefill, +e8+h8). A text-only port's
    # sample on tiny (one unpadded row, calibrated on the unpadded rows) goes lower, HF's own a16w8
    # with it: prefill logits 16.2 dB, KV cache 18.6, decode 17.3 (qnn-gemma4's sample, 2026-12-03)
    **dict.fromkeys(
        ("a16w8", "a16w8+e8+h8"),
        _integer_gate((38, 31, 32, 17, 12, 10, 9, 11), margin=7.0, hf_deficit_db=3.0),
    ),
    # a8w8: worst 15.2 dB prefill logits and 16.5 layers (E2B), 12.9 chunked prefill (E2B), PLE 35.8,
    # vision 37.9; margin shift 8.7 logits (E2B prefill)
    **dict.fromkeys(
        ("a8w8", "a8w8+e8+h8"),
        _integer_gate((38, 29, 31, 10, 12, 9, 6, 9), margin=17.5, hf_deficit_db=6.0),
    ),
    # a16w4 (int4 round-to-nearest, groups of 32, no GPTQ): the seeded fixtures lose about 22 dB to
    # int8: worst 3.0 dB prefill logits (E2B), PLE 14.0, vision 13.4; margin shift 30.2 logits. The
    # gates only catch a run far worse than the scheme's own noise (NaN, a broken stage).
    **dict.fromkeys(
        ("a16w4", "a16w4+e8+h8"),
        _integer_gate((38, 8, 7, -3, -3, -4, -3, -3), margin=60.5, hf_deficit_db=3.0),
    ),
}

# Ports' dynamic recipes (:data:`~gemma4_static.quant.schemes.PORT_SCHEMES`, ExecuTorch's Gemma 4
# export through torchao), measured through the executorch-gemma4 port on tiny, e2b-vision (its text
# decoder: the port is text only) and the E2B geometry, both variants of each base (``python
# benchmarks/numerics_table.py --port executorch-gemma4 --models tiny e2b-vision e2b-geometry --quant
# 8da4w 8da4w+emb8 8da8w 8da8w+emb8``; docs/findings.md). Set as the static ones: 6 dB below the worst stage,
# rounded down; the margin twice the worst shift; the bound against HF in the same scheme (torchao's
# quantize_ on HF's modules) the worst deficit plus 3 dB, rounded up (the port and HF agree within
# 0.09 dB on 8da4w; within 0.92 dB on 8da8w, either way up to 3.6 dB at the E2B prefill logits, where
# per-token activation ranges round differently on two float graphs). No port measured exposes the
# soft tokens or its KV cache (``None``): those take the profile's floor.
QUANT_GATES.update(
    {
        # 8da4w: int4 weights round to nearest in groups of 32 on the seeded fixtures cost what a16w4
        # does: worst 1.8 dB prefill logits (tiny, +emb8), 3.9 layers, 3.3 chunked prefill
        # (e2b-vision), 4.3 decode, PLE 20.6, tables 44.5; margin shift 22.0 logits (tiny)
        **dict.fromkeys(
            ("8da4w", "8da4w+emb8"),
            _integer_gate((38, 14, None, -3, None, -5, -3, -2), margin=44.1, hf_deficit_db=3.0),
        ),
        # 8da8w: worst 15.0 dB prefill logits and 19.8 layers (e2b-vision, +emb8), 22.5 chunked
        # prefill (E2B), 22.0 decode (tiny), PLE 39.7, tables 44.5; margin shift 2.28 logits
        **dict.fromkeys(
            ("8da8w", "8da8w+emb8"),
            _integer_gate((38, 33, None, 13, None, 9, 16, 15), margin=4.6, hf_deficit_db=4.0),
        ),
    }
)

# Ports' static recipes: Samsung TICO's PTQ wrappers (``a16w16t``: its default int16 spec, ``a8w8t``:
# its int8 one; every activation its wrappers observe and every weight, symmetric per tensor),
# calibrated on the suite's prompts, measured through the tico-gemma4 port on e2b-multimodal (the
# embedded model in TICO's scope: ``python benchmarks/numerics_table.py --port tico-gemma4 --models
# e2b-multimodal --quant a16w16t a8w8t``, 2026-12-03; docs/findings.md). Set as the others: 6 dB below
# each stage's worst, rounded down; the margin twice the worst shift. Not gated against HF in the
# same scheme (``hf_deficit_db`` None, shown beside each row): HF's reference quantizes the matmul
# inputs and weights, TICO every activation (norms, RoPE, attention scores and softmax): 5 to 30 dB
# apart in a16w16t by construction, not by a bug.
QUANT_GATES.update(
    {
        # a16w16t: worst 43.7 dB decode, 49.7 layers, 51.9 KV, 54.1 soft tokens, 54.9 prefill logits,
        # PLE 57.7, token embedding 87.7; margin shift 1.97 logits (prefill). TICO prefills in one call:
        # the chunked-prefill gate is the schedules grid's, whose prompts run past the calibration's
        # length (32.5 dB at 1024 tokens; HF's reference 24.1 at 1538)
        "a16w16t": _integer_gate((81, 51, 48, 43, 45, 48, 26, 37), margin=4.0, hf_deficit_db=None),
        # a8w8t: int8 per tensor on every activation leaves the decoder 4.8 dB (HF's int8 matmul inputs:
        # 18.7): worst 1.5 dB decode, 4.4 prefill logits, 5.7 KV, soft tokens 23.1, PLE 24.8, token
        # embedding 39.4, the schedules grid 1.0 (1024 tokens); margin shift 37.0 logits. The gates only
        # catch a run far worse than that.
        "a8w8t": _integer_gate((33, 18, 17, -2, -1, -2, -5, -5), margin=74.0, hf_deficit_db=None),
    }
)

# The schemes XNNPACK runs, as quantized programs (:mod:`gemma4_static.executorch.xnnpack_quant`: PT2E with
# ExecuTorch's XNNPACKQuantizer, int8 at each projection's input *and output*, histogram observer,
# and the vision stage's patch and embedding projections too), measured as stage programs on tiny,
# e2b-vision and the E2B geometry (1139 s, lowering most of it). Its extra quantization points cost
# up to 9 dB against the PyTorch a8w8 profile (soft tokens 30.7 vs 39.7 dB on tiny). Worst: PLE
# 29.6 and soft tokens 30.7 (tiny), layers 15.2, KV 17.2, prefill logits 14.9, decode 15.2 (E2B
# geometry), chunked prefill 13.1 (tiny); gates 6 dB below, margin twice the worst shift, 8.45
# logits (E2B prefill). HF's same-scheme figure is this project's inputs-only a8w8, not XNNPACK's:
# shown, not gated.
XNNPACK_GATES = {"a8w8": _integer_gate((38, 23, 24, 9, 11, 8, 7, 9), margin=17.0, hf_deficit_db=None)}


def quant_gate(scheme: str, backend: str) -> Gate:
    """The gate of integer scheme ``scheme`` on ``backend`` (a ``ValueError`` where it has none)."""
    gates = QUANT_GATES if backend_named(backend).eager else XNNPACK_GATES
    if scheme not in gates:
        raise ValueError(f"quant scheme {scheme!r} has no gates on backend {backend!r}; gated: {list(gates)}")
    return gates[scheme]


# A masked key's softmax weight must stay below this for every score the stage can produce: at
# 2^-24 (one fp32 ulp of 1.0) a masked key cannot move a float32-accumulated attention sum.
MASKED_WEIGHT_BOUND = 2.0**-24
