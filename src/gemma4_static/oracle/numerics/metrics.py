"""Error metrics of a low-precision stage output ``x`` against a reference ``r`` (HF in float64),
the ones deployment teams gate on. Both are flattened and compared in float64.

- max abs error: ``max |x - r|``.
- PEIR (peak error to interval ratio): ``max |x - r| / (max r - min r)``; scale-free, 0 is exact.
- cosine similarity: ``<x, r> / (|x| |r|)``; 1 is exact, blind to a common scale.
- SQNR (signal to quantization noise ratio) in dB: ``10 log10(sum r^2 / sum (x - r)^2)``; +inf when
  exact. 20 dB is an error of 10% of the signal's RMS, 40 dB of 1%; ``cos ~ 1 - 10^(-SQNR/10) / 2``.
- top-k check, for logits ``(N, vocab)``: the reference's *decided* top-k tokens (below) missing
  from ours' top-k; for ``k = 1``, the decided rows whose argmax differs from the reference's.
- KL divergence, for logits ``(N, vocab)``: ``KL(p_ref || p_ours)`` of each row's next-token
  distribution (nats); what a sampling deployment changes, including below the top token.
- matched prefix, for generated tokens ``(B, T)`` (the new tokens only, never the prompt): per row,
  how many leading tokens equal the reference's; the minimum over rows.

Token decisions at a precision. Which of two logits is larger is a fact about the reference only
when their gap exceeds what a correct computation at the profile's precision can move it by:
summation orders differ between processors, thread counts and kernel sets, and a gap inside that
bound can close or open on another machine. So, with a profile's bound ``b`` per row:

- the gap below rank ``k``, ``g_k = r_(k) - r_(k+1)`` (the reference sorted, float64);
- a reference top-k token ``t`` is *decided* when ``r_t - r_(k+1) > b`` (for ``k = 1``: the row's
  top-2 gap exceeds ``b``); a row with no decided token is *tied at this precision*: tied rows are
  counted and reported, never judged;
- the margin shift of a row, ``max_t e_t - min_t e_t`` over the reference's :data:`TOP_REGION`
  tokens (``e = x - r``), is the most any gap among them moved. While it stays within ``b``, no
  decided top-1 or top-5 boundary inside that region can flip, so a decided row that disagrees is a
  real error, never a coin toss; a run whose shift exceeds ``b`` breaks the rule's premise and fails.

``b`` is a constant of the profile (measured on correct runs, with a safety factor), never the
error of the run under test: any flip implies that run's own shift is at least the gap it crossed,
so a bound taken from the run itself would excuse every flip.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Metrics:
    """The metrics of one stage output (see the module docstring for each formula)."""

    max_abs: float
    peir: float
    cosine: float
    sqnr_db: float


def measure(ours: torch.Tensor, reference: torch.Tensor) -> Metrics:
    """:class:`Metrics` of ``ours`` against ``reference`` (same shape); NaN/inf in ``ours`` give NaN
    metrics, which fail every gate."""
    if ours.shape != reference.shape:
        raise ValueError(f"ours has shape {tuple(ours.shape)}, the reference {tuple(reference.shape)}")
    x, r = ours.detach().double().flatten(), reference.detach().double().flatten()
    if not bool(torch.isfinite(x).all()):
        nan = float("nan")
        return Metrics(nan, nan, nan, nan)
    error = x - r
    max_abs = float(error.abs().max()) if error.numel() else 0.0
    interval = float(r.max() - r.min()) if r.numel() else 0.0
    noise, signal = float((error**2).sum()), float((r**2).sum())
    norms = float(x.norm() * r.norm())
    return Metrics(
        max_abs=max_abs,
        peir=max_abs / interval if interval else (0.0 if max_abs == 0 else math.inf),
        cosine=float(x @ r) / norms if norms else (1.0 if noise == 0 else 0.0),
        sqnr_db=10 * math.log10(signal / noise) if noise else math.inf,
    )


TOP_REGION = 6  # the top-1 and top-5 decisions are made among the reference's six largest logits


def ulp(dtype: torch.dtype, magnitude: torch.Tensor) -> torch.Tensor:
    """The spacing of ``dtype`` numbers at ``|magnitude|`` (elementwise, float64): ``eps * 2^floor(log2 |m|)``,
    e.g. 0.125 for bfloat16 and 2^-6 for float16 at logits in ``[16, 32)``."""
    info = torch.finfo(dtype)
    exponent = torch.floor(torch.log2(magnitude.double().abs().clamp_min(info.tiny)))
    return info.eps * torch.exp2(exponent)


def gaps(reference: torch.Tensor, k: int) -> torch.Tensor:
    """``(N,)`` float64: for logits ``(N, vocab)``, the gap ``r_(k) - r_(k+1)`` below each row's k-th largest."""
    top = reference.double().topk(k + 1, dim=-1).values
    return top[:, k - 1] - top[:, k]


def margin_shift(ours: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """``(N,)`` float64: per row, the spread ``max e - min e`` of the errors ``e = ours - reference`` on
    the reference's :data:`TOP_REGION` largest logits (``inf`` where ``ours`` is not finite)."""
    _check_logits(ours, reference)
    top = reference.double().topk(min(TOP_REGION, reference.shape[-1]), dim=-1).indices
    error = ours.double().gather(1, top) - reference.double().gather(1, top)
    shift = error.amax(dim=-1) - error.amin(dim=-1)
    return torch.where(torch.isfinite(ours).all(dim=-1), shift, torch.inf)


@dataclass(frozen=True)
class TokenCheck:
    """The top-k rule on one set of logits: ``decided`` reference top-k tokens (each above the gap
    bound over rank ``k + 1``), ``missed`` of them not in ours' top-k (0 for a correct run), and the
    rows with no decided token (tied at this precision)."""

    missed: int
    decided: int
    tied: tuple[int, ...]


def top_k_check(ours: torch.Tensor, reference: torch.Tensor, k: int, bound: torch.Tensor | float) -> TokenCheck:
    """For logits ``(N, vocab)``: the reference's top-k tokens ``t`` with ``r_t - r_(k+1) > bound`` (per
    row or one value) are decided, and each must be in ours' top-k (for ``k = 1``: ours' argmax is the
    reference's wherever its top-2 gap exceeds the bound). Rows of ``ours`` with NaN/inf miss all."""
    _check_logits(ours, reference)
    if not 1 <= k < reference.shape[-1]:
        raise ValueError(f"k must be in [1, vocab) = [1, {reference.shape[-1]}), got {k}")
    top = reference.double().topk(k + 1, dim=-1)
    limit = torch.as_tensor(bound, dtype=torch.float64).reshape(-1, 1)
    decided = top.values[:, :k] - top.values[:, k : k + 1] > limit
    mine = ours.float().topk(k, dim=-1).indices
    found = (top.indices[:, :k, None] == mine[:, None, :]).any(dim=-1) & torch.isfinite(ours).all(dim=-1, keepdim=True)
    tied = tuple(int(row) for row in torch.nonzero(~decided.any(dim=-1)).flatten())
    return TokenCheck(int((decided & ~found).sum()), int(decided.sum()), tied)


@dataclass(frozen=True)
class GreedyComparison:
    """Greedy tokens against the reference's: the matched prefix (minimum over rows) and each row's
    first divergence as ``(row, step, gap)``, ``gap`` the reference's lead of its own token over the
    one taken there, split into decided (beyond the bound: an error; a token the reference all but
    ties with its own is the only excuse) and tied at this precision (the rest of that row is then a
    different continuation, not compared)."""

    matched_prefix: int
    decided: tuple[tuple[int, int, float], ...]
    tied: tuple[tuple[int, int, float], ...]


def compare_greedy(
    ours: torch.Tensor, reference: torch.Tensor, reference_logits: torch.Tensor, bound: torch.Tensor | float
) -> GreedyComparison:
    """``ours``/``reference`` tokens ``(B, T)``; ``reference_logits (B, T, vocab)``, the reference's logits
    at each step it generated; ``bound`` per step ``(B, T)`` or one value."""
    if ours.shape != reference.shape or reference_logits.shape[:2] != reference.shape:
        raise ValueError(
            f"tokens {tuple(ours.shape)} and {tuple(reference.shape)} need logits of shape (B, T, vocab), "
            f"got {tuple(reference_logits.shape)}"
        )
    bounds = torch.as_tensor(bound, dtype=torch.float64).expand(reference.shape)
    decided, tied = [], []
    for row, (mine, theirs) in enumerate(zip(ours, reference, strict=True)):
        mismatch = torch.nonzero(mine != theirs).flatten()
        if mismatch.numel():
            step = int(mismatch[0])
            logits, token = reference_logits[row, step].double(), int(mine[step])
            # the reference's lead of its own token over the one taken (a token outside the vocabulary: none taken)
            gap = float(logits.max() - logits[token]) if 0 <= token < logits.numel() else math.inf
            (decided if not gap <= float(bounds[row, step]) else tied).append((row, step, gap))
    return GreedyComparison(matched_prefix(ours, reference), tuple(decided), tuple(tied))


def matched_prefix(ours: torch.Tensor, reference: torch.Tensor) -> int:
    """The smallest number of leading generated tokens ``(B, T)`` that match the reference in any row."""
    if ours.shape != reference.shape:
        raise ValueError(f"ours has shape {tuple(ours.shape)}, the reference {tuple(reference.shape)}")
    mismatch = ours != reference
    first = torch.where(mismatch.any(dim=1), mismatch.float().argmax(dim=1), ours.shape[1])
    return int(first.min())


def _check_logits(ours: torch.Tensor, reference: torch.Tensor) -> None:
    if ours.shape != reference.shape or ours.dim() != 2:
        raise ValueError(f"logits must be two (N, vocab) tensors of one shape, got {ours.shape} and {reference.shape}")


def kl_divergence(ours: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """``(N,)`` the KL divergence ``KL(p_ref || p_ours)`` in nats of each row's next-token
    distribution, ``softmax`` of logits ``(N, vocab)``, in float64: 0 when equal."""
    log_ours = torch.log_softmax(ours.double(), dim=-1)
    log_reference = torch.log_softmax(reference.double(), dim=-1)
    return (log_reference.exp() * (log_reference - log_ours)).sum(dim=-1)
