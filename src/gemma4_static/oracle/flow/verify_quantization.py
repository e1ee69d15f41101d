"""The ``quantization`` check group of :mod:`.verify`: an integer profile's every site against a
second implementation. Each quantized weight against torchao's (:mod:`..numerics.reference_quant`)
from the same float weight; each activation range against the range HF's same-scheme model observed
at the same matmul on the same calibration prompts (:mod:`..numerics.quantized`). A bug in this
project's fake quantization (a dropped zero point, blocks along the wrong axis, a range taken at
another site) fails here by name, where the stage rows only see its noise.

Tolerances, and why:

- weights: 0. Both sides compute ``max|w| / ((high - low) / 2)`` per block and round half to even in
  float32: measured equal, bit for bit, on every site of the default models and on random weights
  (``tests/unit/test_quant_reference.py``).
- a range that leaves out values HF saw: at most half a step (:data:`UNCOVERED_STEPS`). The runtime
  observes every position HF observes (and the static padding beyond), and rounding the zero point
  to an integer moves each end of the represented range by at most half a step.
- a range wider than HF's: at most :data:`WIDER` times. The runtime's static shapes run padding
  positions HF never computes, and their activations widen some ranges: measured at most 1.19x
  (tiny, ``layer 0 ple_gate``), 1.33x (e2b-vision, ``layer 8 down_proj``), 1.52x (E2B geometry,
  ``LM head`` in ``a16w8+e8+h8``) over a16w8, a8w8 and their ``+e8+h8`` variants; 2x leaves a
  third of the range's width for other prompts, and a range taken at another site is off by far
  more (a down_proj at its up_proj's range: 150x).
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from ...quant import QuantProfile
from ..checks.report import Row, skip_row
from ..numerics.reference_quant import reference_weight
from .port_calls import guarded
from .session import Session

STAGE = "quantization"
UNCOVERED_STEPS = 0.5 + 1e-3  # half a step (the zero point's rounding), plus float32 rounding of the ends
WIDER = 2.0
RANGE_OUTSIDE = 1e-3  # of HF's width: the two sides' float32 reductions of the same values, nothing more


def quantization_rows(session: Session) -> Iterator[Row]:
    """Every site of this runtime's integer profile: its weight against torchao's, its activation
    range against HF's at the same matmul. No rows without an integer profile; one SKIP row for
    XNNPACK's own quantizer or a port's own recipe."""
    if session.scheme is None:
        return
    if session.quant is None and session.scheme.dynamic:
        reason = (
            f"{session.port.name} quantizes itself in its own recipe ({session.scheme.name}): no site of the fake "
            "quantization runs; HF in the same scheme stands beside every stage row"
        )
        yield skip_row(STAGE, "sites vs torchao and HF's ranges", reason)
        return
    if session.quant is None:  # a port's static recipe: the ranges it calibrated beside HF's
        yield from guarded(STAGE, "its calibrated ranges vs HF's", lambda: port_range_rows(session))
        return
    if not isinstance(session.quant, QuantProfile):
        reason = "XNNPACK's PT2E quantizer chooses its own ranges and layout; no site of the fake quantization runs"
        yield skip_row(STAGE, "sites vs torchao and HF's ranges", reason)
        return
    sites = [site for site in session.quant.sites if site.name in session.hf_sites]
    unmatched = [site.name for site in session.quant.sites if site.name not in session.hf_sites]
    if unmatched:  # said, never silently left out
        check = f"sites HF's forward never reached: {', '.join(unmatched[:3])}{', ...' if len(unmatched) > 3 else ''}"
        yield Row(STAGE, check, "sites not compared", len(unmatched), math.inf)
    yield weight_row(sites, session.hf_sites)
    measured = [site for site in sites if site.activation is not None]
    yield from range_rows(measured, session.hf_sites)


def port_range_rows(session: Session) -> list[Row]:
    """A port's calibrated activation ranges (:meth:`~gemma4_static.ports.base.Gemma4Port.observed_ranges`,
    by the suite's site names) against HF's at the same matmul on the same calibration prompts: how
    much of HF's range it leaves out (a fraction of HF's width; gated: calibrated on the same prompts, a
    range holds every value HF saw), and how much wider it is (shown: a port's recipe may be symmetric,
    and its static shapes may observe padding)."""
    ranges, reference = session.port.observed_ranges(), session.hf_sites
    sites = [(name, ranges[name], reference[name].activation) for name in ranges if name in reference]
    sites = [(name, ours, theirs) for name, ours, theirs in sites if theirs is not None and theirs.observed]
    outside, wider = [], []
    for name, (low, high), theirs in sites:
        width = max(theirs.maximum - theirs.minimum, 1e-30)
        outside.append((max(low - theirs.minimum, theirs.maximum - high, 0.0) / width, name))
        wider.append(((high - low) / width, name))
    worst_outside, where = max(outside, default=(math.nan, ""))  # nothing compared never passes
    widest, widest_at = max(wider, default=(math.nan, ""))
    check = f"{len(sites)} of its {len(ranges)} calibrated ranges vs HF's"
    return [
        Row(STAGE, f"{check} [worst: {where}]", "HF's range outside (share)", worst_outside, RANGE_OUTSIDE),
        Row(STAGE, f"{check} [widest: {widest_at}]", "width / HF's", widest, math.inf),
    ]


def weight_row(sites: list, reference: dict) -> Row:
    """Every site's quantized weight against torchao's from the same float weight."""
    differences = []
    for site in sites:
        theirs = reference_weight(site.original, reference[site.name].weight_bits, reference[site.name].group_size)
        differences.append((float((site.quantized.detach() - theirs).abs().max()), site.name))
    worst = max((value for value, _ in differences), default=math.nan)  # nothing compared never passes
    first = _first(differences, 0.0)
    check = f"{len(sites)} quantized weights vs torchao" + (f" [first: {first}]" if first else "")
    return Row(STAGE, check, "max |ours - torchao|", worst, 0.0)


def range_rows(sites: list, reference: dict) -> Iterator[Row]:
    """Every site's activation range against HF's observed one: what it leaves out, in steps, and
    how much wider it is."""
    uncovered, wider = [], []
    for site in sites:
        ours, theirs = site.activation, reference[site.name].activation
        scale, zero_point = float(ours.scale), float(ours.zero_point)
        low, high = (ours.low - zero_point) * scale, (ours.high - zero_point) * scale
        seen_low, seen_high = min(theirs.minimum, 0.0), max(theirs.maximum, 0.0)
        uncovered.append((max(low - theirs.minimum, theirs.maximum - high, 0.0) / scale, site.name))
        wider.append(((high - low) / max(seen_high - seen_low, 1e-30), site.name))
    for figures, metric, bound in (
        (uncovered, "HF's values outside (steps)", UNCOVERED_STEPS),
        (wider, "width / HF's", WIDER),
    ):
        worst, name = max(figures, default=(math.nan, ""))
        first = _first(figures, bound)
        check = f"{len(sites)} activation ranges vs HF's" + (f" [first: {first}]" if first else f" [worst: {name}]")
        yield Row(STAGE, check, metric, worst, bound)


def _first(figures: list[tuple[float, str]], bound: float) -> str:
    """The first site (in data-flow order) whose figure exceeds ``bound``, else ``""``."""
    return next((name for value, name in figures if value > bound), "")
