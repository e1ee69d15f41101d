"""Checks of a low-precision profile: a stage output's :mod:`.metrics` against HF in float64 (HF's
own same-dtype metrics beside ours) gated by :mod:`.gates`, and the mask value's safety bound."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from ...spec import read_text_config, text_module
from ..results import tolerances
from ..results.report import Row
from .gates import MASKED_WEIGHT_BOUND, Gate
from .metrics import compare_greedy, gaps, margin_shift, measure, top_k_check

UNGATED = math.inf  # an error metric reported beside the gated ones; fails only when not a number


def metric_rows(
    stage: str, check: str, ours: torch.Tensor, hf: torch.Tensor, reference: torch.Tensor, gate: Gate
) -> list[Row]:
    """SQNR and cosine (gated), max abs error and PEIR (reported) of ``ours`` and of HF's output in the
    same profile ``hf`` against the float64 ``reference``; where the gate bounds it, how far ours falls
    below HF's SQNR."""
    mine, theirs = measure(ours, reference), measure(hf, reference)
    rows = [
        Row(stage, check, "SQNR dB", mine.sqnr_db, gate.sqnr_gate(stage), higher_is_better=True, hf=theirs.sqnr_db),
        Row(stage, check, "cosine", mine.cosine, gate.cosine_gate(stage), higher_is_better=True, hf=theirs.cosine),
        Row(stage, check, "max abs error", mine.max_abs, UNGATED, hf=theirs.max_abs),
        Row(stage, check, "PEIR", mine.peir, UNGATED, hf=theirs.peir),
    ]
    if gate.hf_deficit_db is not None:
        exact = math.isinf(mine.sqnr_db) and math.isinf(theirs.sqnr_db)  # both exact: no deficit
        deficit = 0.0 if exact else theirs.sqnr_db - mine.sqnr_db
        rows.append(Row(stage, check, "SQNR below HF's (dB)", deficit, gate.hf_deficit_db))
    return rows


def token_rows(
    stage: str,
    check: str,
    ours: torch.Tensor,
    hf: torch.Tensor,
    reference: torch.Tensor,
    gate: Gate,
    names: Callable[[int], str],
) -> list[Row]:
    """The token rule (:mod:`.metrics`) of a low-precision profile on logits ``(N, vocab)``: the margin
    shift in ulps, gated at the profile's bound (the rule's premise), then :func:`decision_rows` for
    top-1 and top-5. HF's same-dtype figures beside ours, under the same rule."""
    units, bound = gate.units(reference), gate.token_bound(reference)
    shifts = [float((margin_shift(logits, reference) / units).max()) for logits in (ours, hf)]
    return [
        Row(stage, check, f"margin shift ({gate.unit})", shifts[0], gate.margin, hf=shifts[1]),
        *decision_rows(stage, check, ours, reference, bound, gate.bound_text, names, hf=hf, ks=(1, 5)),
    ]


def decision_rows(
    stage: str,
    check: str,
    ours: torch.Tensor,
    reference: torch.Tensor,
    bound: torch.Tensor | float,
    bound_text: str,
    names: Callable[[int], str],
    *,
    hf: torch.Tensor | None = None,
    ks: tuple[int, ...] = (1,),
) -> list[Row]:
    """Per ``k`` of ``ks``: the decided top-k tokens of ``reference (N, vocab)`` that ``ours`` misses
    (tolerance 0; :func:`~.metrics.top_k_check` with gap bound ``bound``), and after top-1 the rows tied
    at this precision (reported, the three closest named by ``names(row)`` with their gaps)."""
    rows = []
    for k in ks:
        mine = top_k_check(ours, reference, k, bound)
        theirs = None if hf is None else top_k_check(hf, reference, k, bound).missed
        tokens = len(reference) * k
        metric = "top-1 disagreements" if k == 1 else f"top-{k} tokens missed"
        decided = f"{check}, {mine.decided} of {tokens} decided"
        rows.append(Row(stage, decided, metric, mine.missed, tolerances.EXACT, hf=theirs))
        if k == 1:
            gap = gaps(reference, 1)
            tied = sorted(mine.tied, key=lambda row: float(gap[row]))
            closest = ", ".join(f"{names(row)} ({float(gap[row]):.3g})" for row in tied[:3])
            where = f"{check}, top-2 gap <= {bound_text}" + (f"; closest {closest}" if tied else "")
            rows.append(Row(stage, where, "tied at this precision", len(tied), UNGATED))
    return rows


def sample_gap_row(stage: str, reference: torch.Tensor, gate: Gate) -> Row:
    """The float64 top-2 gaps of the sample rows ``(B, vocab)``, in logits and in the profile's unit,
    and how many of them are decided (reported: a knife-edge sample decides nothing)."""
    units = gate.units(reference)
    gap = gaps(reference, 1)
    listed = ", ".join(
        f"{float(value):.3g} ({float(value / unit):.1f} {gate.unit})" for value, unit in zip(gap, units, strict=True)
    )
    decided = int((gap > gate.token_bound(reference)).sum())
    check = f"float64 top-2 gaps {listed}: {decided} of {len(gap)} decided"
    smallest = float((gap / units).min())
    return Row(stage, check, f"smallest gap ({gate.unit})", smallest, -math.inf, higher_is_better=True)


def greedy_rows(
    stage: str,
    check: str,
    ours: torch.Tensor,
    reference: torch.Tensor,
    reference_logits: torch.Tensor,
    bound: torch.Tensor | float,
    *,
    hf: torch.Tensor | None = None,
) -> list[Row]:
    """Greedy tokens ``(B, T)`` (the generated ones only) against the reference's, whose logits at
    each step are ``reference_logits (B, T, vocab)``: no row may leave the reference at a decided step
    (top-2 gap beyond ``bound``, per step or one value; tolerance 0); divergences at tied steps are
    counted and named (that row's continuation then differs and is not compared); the matched prefix
    is reported. HF's same-dtype figures beside ours when ``hf`` is given."""
    mine = compare_greedy(ours, reference, reference_logits, bound)
    theirs = None if hf is None else compare_greedy(hf, reference, reference_logits, bound)
    first = "".join(
        f" [first: row {row} step {step}, gap {gap:.3g}: token {int(ours[row, step])} where the reference's is "
        f"{int(reference[row, step])}, after {int(ours[row, step - 1]) if step else 'the prompt'}]"
        for row, step, gap in mine.decided[:1]
    )
    tied = ", ".join(f"row {row} step {step} ({gap:.3g})" for row, step, gap in mine.tied) or "no step"
    return [
        Row(
            stage,
            check + first,
            "decided divergences",
            len(mine.decided),
            tolerances.EXACT,
            hf=None if theirs is None else len(theirs.decided),
        ),
        Row(stage, f"{check}, tied at {tied}", "tied divergences", len(mine.tied), UNGATED),
        Row(
            stage,
            check,
            "matched prefix",
            mine.matched_prefix,
            -math.inf,
            higher_is_better=True,
            hf=None if theirs is None else theirs.matched_prefix,
        ),
    ]


def hf_score_bound(model: Any) -> float:
    """The largest ``|q . k|`` any layer of ``model`` (HF's) can produce: q and k are RMS-normed (RMS
    1, so ``|x| = sqrt(D)``) then scaled by the norm weights, and RoPE is a rotation, so ``|q . k| <= D
    max|w_q| max|w_k|`` (``w_k`` of the layer that produced the K/V); attention runs with ``scaling = 1``."""
    layers = text_module(model).layers
    sources = read_text_config(model.config).kv_sources
    bound = 0.0
    for layer, source in zip(layers, sources, strict=True):
        attention, producer = layer.self_attn, layers[source].self_attn
        k_norm = getattr(producer, "k_norm", None)
        w_k = float(k_norm.weight.abs().max()) if k_norm is not None and k_norm.with_scale else 1.0
        bound = max(bound, attention.head_dim * float(attention.q_norm.weight.abs().max()) * w_k)
    return bound


def mask_value_check(fill: float, dtype: torch.dtype, keys: int, bound: float) -> list[Row]:
    """Whether an additive mask value ``fill`` is safe in ``dtype`` for every score a model can
    produce (``bound``, :func:`hf_score_bound`) over ``keys`` keys at most:

    - the masked weight: a masked key's softmax weight is at most ``exp(m + 2B)`` relative to any
      allowed key, so all masked keys of a row together weigh at most ``K exp(m + 2B)``, which must
      stay below :data:`~gemma4_static.oracle.numerics.gates.MASKED_WEIGHT_BOUND`;
    - finite arithmetic: ``m - B`` computed in ``dtype`` must stay finite (an adder that overflows to
      ``-inf`` turns a fully masked row, e.g. a padded query, into NaN, which then reaches real rows
      through ``0 x NaN``).
    """
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
