"""Checks of a low-precision profile: a stage output's :mod:`.metrics` against HF in float64 (HF's
own same-dtype metrics beside ours) gated by :mod:`.gates`, and the mask value's safety bound."""

from __future__ import annotations

import math
from typing import Any

import torch

from .gates import MASKED_WEIGHT_BOUND, Gate
from .metrics import matched_prefix, measure, top_k_agreement
from .report import Row

UNGATED = math.inf  # an error metric reported beside the gated ones; fails only when not a number


def metric_rows(
    stage: str,
    check: str,
    ours: torch.Tensor,
    hf: torch.Tensor,
    reference: torch.Tensor,
    gate: Gate,
    *,
    logits: str | None = None,
) -> list[Row]:
    """SQNR and cosine (gated), max abs error and PEIR (reported) of ``ours`` and of HF's same-dtype
    output ``hf`` against the float64 ``reference``; for ``logits (N, vocab)`` (``"prefill"`` or
    ``"decode"``) also top-1 and top-5 agreement, gated with that stage's top-1 threshold."""
    mine, theirs = measure(ours, reference), measure(hf, reference)
    rows = [
        Row(stage, check, "SQNR dB", mine.sqnr_db, gate.sqnr_db, higher_is_better=True, hf=theirs.sqnr_db),
        Row(stage, check, "cosine", mine.cosine, gate.cosine, higher_is_better=True, hf=theirs.cosine),
        Row(stage, check, "max abs error", mine.max_abs, UNGATED, hf=theirs.max_abs),
        Row(stage, check, "PEIR", mine.peir, UNGATED, hf=theirs.peir),
    ]
    if logits is not None:
        top1 = gate.top1 if logits == "prefill" else gate.decode_top1
        for k, threshold in ((1, top1), (5, gate.top5)):
            ours_k, hf_k = top_k_agreement(ours, reference, k), top_k_agreement(hf, reference, k)
            rows.append(Row(stage, check, f"top-{k} agreement", ours_k, threshold, higher_is_better=True, hf=hf_k))
    return rows


def prefix_row(
    stage: str, check: str, ours: torch.Tensor, hf: torch.Tensor, reference: torch.Tensor, gate: Gate
) -> Row:
    """Greedy tokens ``(B, T)`` (the generated ones only): the matched prefix against float64's,
    gated at ``min(gate, T)`` (reported only where the profile does not gate it)."""
    value, theirs = matched_prefix(ours, reference), matched_prefix(hf, reference)
    threshold = -math.inf if gate.matched_prefix is None else min(gate.matched_prefix, ours.shape[1])
    return Row(stage, check, "matched prefix", value, threshold, higher_is_better=True, hf=theirs)


def score_bound(layers: Any, sources: tuple[int, ...]) -> float:
    """The largest ``|q . k|`` any layer can produce: q and k are RMS-normed (RMS 1, so ``|x| = sqrt(D)``)
    then scaled by the norm weights, and RoPE is a rotation, so ``|q . k| <= D max|w_q| max|w_k|``
    (``w_k`` of the layer that produced the K/V); attention runs with ``scaling = 1``."""
    bound = 0.0
    for layer, source in zip(layers, sources, strict=True):
        k_norm = layers[source].k_norm
        w_k = float(k_norm.abs().max()) if k_norm is not None else 1.0
        bound = max(bound, layer.head_dim * float(layer.q_norm.abs().max()) * w_k)
    return bound


def mask_value_rows(runtime: Any) -> list[Row]:
    """Whether the runtime's additive mask value is safe for every score its layers can produce
    (:func:`score_bound` ``B``, over ``K`` keys at most ``max_seq``):

    - the masked weight: a masked key's softmax weight is at most ``exp(m + 2B)`` relative to any
      allowed key, so all masked keys of a row together weigh at most ``K exp(m + 2B)``, which must
      stay below :data:`~gemma4_static.oracle.gates.MASKED_WEIGHT_BOUND`;
    - finite arithmetic: ``m - B`` computed in the runtime's dtype must stay finite (an adder that
      overflows to ``-inf`` turns a fully masked row, e.g. a padded query, into NaN, which then
      reaches real rows through ``0 x NaN``).
    """
    dtype, fill = runtime.spec.dtype, runtime.stack.fill  # the value the masks are built with
    bound = score_bound(runtime.modules.layers, runtime.cache.sources)
    keys = runtime.layout.max_seq
    exponent = fill + 2 * bound
    weight = keys * math.exp(exponent) if exponent < 700 else math.inf
    lowest = torch.tensor(fill, dtype=dtype) - torch.tensor(bound, dtype=dtype)
    name = str(dtype).removeprefix("torch.")
    return [
        Row(
            "mask value",
            f"{fill:.6g} over {keys} keys, score bound {bound:.3g}",
            "masked weight bound",
            weight,
            MASKED_WEIGHT_BOUND,
        ),
        Row(
            "mask value",
            f"{fill:.6g} - score bound in {name}",
            "overflows to -inf",
            0 if bool(torch.isfinite(lowest)) else 1,
            0.0,
        ),
    ]
