"""Error metrics of a low-precision stage output ``x`` against a reference ``r`` (HF in float64),
the ones deployment teams gate on. Both are flattened and compared in float64.

- max abs error: ``max |x - r|``.
- PEIR (peak error to interval ratio): ``max |x - r| / (max r - min r)``; scale-free, 0 is exact.
- cosine similarity: ``<x, r> / (|x| |r|)``; 1 is exact, blind to a common scale.
- SQNR (signal to quantization noise ratio) in dB: ``10 log10(sum r^2 / sum (x - r)^2)``; +inf when
  exact. 20 dB is an error of 10% of the signal's RMS, 40 dB of 1%; ``cos ~ 1 - 10^(-SQNR/10) / 2``.
- top-k agreement, for logits ``(N, vocab)``: top-1 is the fraction of rows whose argmax equals the
  reference's; top-5 is the mean overlap of the two top-5 sets (``|A & B| / 5``).
- matched prefix, for generated tokens ``(B, T)`` (the new tokens only, never the prompt): per row,
  how many leading tokens equal the reference's; the minimum over rows.
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


def top_k_agreement(ours: torch.Tensor, reference: torch.Tensor, k: int) -> float:
    """For logits ``(N, vocab)``: top-1 (``k = 1``) the fraction of rows with the reference's argmax;
    otherwise the mean overlap ``|top-k(ours) & top-k(ref)| / k`` over rows. NaN rows never agree."""
    if ours.shape != reference.shape or ours.dim() != 2:
        raise ValueError(f"logits must be two (N, vocab) tensors of one shape, got {ours.shape} and {reference.shape}")
    finite = torch.isfinite(ours).all(dim=-1)
    mine, theirs = ours.float().topk(k, dim=-1).indices, reference.double().topk(k, dim=-1).indices
    overlap = (mine[:, :, None] == theirs[:, None, :]).any(dim=-1).sum(dim=-1).double() / k
    return float((overlap * finite).mean())


def matched_prefix(ours: torch.Tensor, reference: torch.Tensor) -> int:
    """The smallest number of leading generated tokens ``(B, T)`` that match the reference in any row."""
    if ours.shape != reference.shape:
        raise ValueError(f"ours has shape {tuple(ours.shape)}, the reference {tuple(reference.shape)}")
    mismatch = ours != reference
    first = torch.where(mismatch.any(dim=1), mismatch.float().argmax(dim=1), ours.shape[1])
    return int(first.min())
