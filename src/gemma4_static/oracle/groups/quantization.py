"""The ``quantization`` check group: an integer profile's every site against a
second implementation. Each quantized weight against torchao's (:mod:`..numerics.reference_quant`)
from the same float weight; each activation range against the range HF's same-scheme model observed
at the same matmul on the same calibration prompts (:mod:`..numerics.quantized`). A bug in this
project's fake quantization (a dropped zero point, blocks along the wrong axis, a range taken at
another site) fails here by name, where the stage rows only see its noise.

Tolerances, and why:

- weights: 0. Both sides compute ``max|w| / ((high - low) / 2)`` per block and round half to even in
  float32: measured equal, bit for bit, on every site of the default models and on random weights
  (``tests/unit/test_quant_reference.py``).
- a range that leaves out values HF saw: at most half a step (:data:`UNCOVERED_STEPS`), beyond
  what two float32 forwards of the same values disagree by at its ends (the float32 relative
  tolerance of their magnitude). Both sides observe the same tokens (the calibration rows alone and
  unpadded; this runtime's static padding is never observed), and rounding the zero point to an
  integer moves each end of the represented range by at most half a step.
- a range wider than HF's (as the recipe widens it: symmetric, twice the larger magnitude): at most
  :data:`RANGE_WIDER` times. Two float implementations of the same tokens move the extremes by far
  less; a range that is wider saw values HF's forward does not produce there: the static buffer's
  padding (this runtime observed it until calibration excluded it: up to 2x on the tiny model), a
  range taken before the norm that feeds the matmul (6.7x), or at another site (150x).
- a port's own recipe (:func:`port_range_rows`): the range each site quantizes with, as it reports
  it; where its observers clip outliers by design (a histogram observer), what it leaves out is shown.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import torch

from ...ports.capabilities.calibration import CALIBRATION, OBSERVED_RANGES, representable_range
from ...quant import QuantProfile
from ..numerics.reference_quant import reference_weight
from ..results import tolerances
from ..results.report import Row, skip_row
from ..session.port_calls import guarded
from ..session.session import Session
from . import CheckGroup

STAGE = "quantization"
UNCOVERED_STEPS = 0.5  # half a step: the zero point's rounding (beyond two float32 forwards' disagreement, below)
# a port's range wider than HF's values at the same matmul on the same rows (as its recipe widens
# them) by more than this saw values HF's forward does not produce there (padding, another tensor);
# two float implementations move the extremes by far less (measured: this runtime 1.000 on tiny in
# a8w8, TICO 1.000 on e2b-multimodal in a16w16t, ExecuTorch's PT2E 0.9995 on tiny in a8w8)
RANGE_WIDER = 1.1


def quantization_rows(session: Session) -> Iterator[Row]:
    """Every site of this runtime's integer profile: its weight against torchao's, its activation
    range against HF's at the same matmul (an integer profile's group); one SKIP row for XNNPACK's own
    quantizer or a port's own recipe."""
    adopted = session.sides.adopted
    if adopted is None and session.scheme.dynamic:
        reason = (
            f"{session.port.name} quantizes itself in its own recipe ({session.scheme.name}): no site of the fake "
            "quantization runs; HF in the same scheme stands beside every stage row"
        )
        yield skip_row(STAGE, "sites vs torchao and HF's ranges", reason)
        return
    if adopted is None:  # a port's static recipe: the ranges it calibrated beside HF's
        yield from guarded(STAGE, "its calibrated ranges vs HF's", lambda: port_range_rows(session))
        return
    if not isinstance(adopted, QuantProfile):
        reason = "XNNPACK's PT2E quantizer chooses its own ranges and layout; no site of the fake quantization runs"
        yield skip_row(STAGE, "sites vs torchao and HF's ranges", reason)
        return
    hf_sites = session.sides.hf_sites
    sites = [site for site in adopted.sites if site.name in hf_sites]
    unmatched = [site.name for site in adopted.sites if site.name not in hf_sites]
    if unmatched:  # said, never silently left out
        check = f"sites HF's forward never reached: {', '.join(unmatched[:3])}{', ...' if len(unmatched) > 3 else ''}"
        yield Row(STAGE, check, "sites not compared", len(unmatched), math.inf)
    yield weight_row(sites, hf_sites)
    measured = [site for site in sites if site.activation is not None]
    yield from range_rows(measured, hf_sites)


def port_range_rows(session: Session) -> list[Row]:
    """A port's calibrated activation ranges (:meth:`~gemma4_static.ports.Gemma4Port.observed_ranges`:
    what each site quantizes with, by the suite's site names) against HF's at the same matmul on the
    same calibration rows: how much of HF's range it leaves out, in steps of its own grid (gated at
    half a step, the zero point's rounding, unless its recipe's observers clip by design), and its
    width against HF's range as its recipe widens it (symmetric: twice the larger magnitude; gated
    at :data:`RANGE_WIDER`)."""
    ranges, reference = session.port.observed_ranges(), session.sides.hf_sites
    recipe = session.port.limits.schemes.recipe(session.scheme.name)
    levels = 2**session.scheme.activation_bits - 1
    sites = [(name, ranges[name], reference[name].activation) for name in ranges if name in reference]
    sites = [(name, ours, theirs) for name, ours, theirs in sites if theirs is not None and theirs.observed]
    uncovered, wider = [], []
    for name, (low, high), theirs in sites:
        step = max(high - low, 1e-30) / levels
        uncovered.append((outside(low, high, theirs) / step, name))
        magnitude = max(abs(theirs.minimum), abs(theirs.maximum))
        expected = (
            2 * magnitude if recipe is not None and recipe.activation_symmetric else theirs.maximum - theirs.minimum
        )
        wider.append(((high - low) / max(expected, 1e-30), name))
    worst_outside, where = max(uncovered, default=(math.nan, ""))  # nothing compared never passes
    widest, widest_at = max(wider, default=(math.nan, ""))
    clipping = recipe is not None and recipe.activation_clipping
    check = f"{len(sites)} of its {len(ranges)} calibrated ranges vs HF's"
    return [
        Row(
            STAGE,
            f"{check} [worst: {where}]" + (" (its observers clip by design)" if clipping else ""),
            "HF's range outside (steps)",
            worst_outside,
            math.inf if clipping else UNCOVERED_STEPS,
        ),
        Row(STAGE, f"{check} [widest: {widest_at}]", "width / HF's as its recipe widens it", widest, RANGE_WIDER),
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
        scale = float(ours.scale)
        low, high = representable_range(scale, float(ours.zero_point), ours.low, ours.high)
        seen_low, seen_high = min(theirs.minimum, 0.0), max(theirs.maximum, 0.0)
        uncovered.append((outside(low, high, theirs) / scale, site.name))
        wider.append(((high - low) / max(seen_high - seen_low, 1e-30), site.name))
    for figures, metric, bound in (
        (uncovered, "HF's values outside (steps)", UNCOVERED_STEPS),
        (wider, "width / HF's", RANGE_WIDER),
    ):
        worst, name = max(figures, default=(math.nan, ""))
        first = _first(figures, bound)
        check = f"{len(sites)} activation ranges vs HF's" + (f" [first: {first}]" if first else f" [worst: {name}]")
        yield Row(STAGE, check, metric, worst, bound)


def outside(low: float, high: float, theirs: Any) -> float:
    """How far HF's observed range ``theirs`` reaches past ``[low, high]``, beyond what two float32
    forwards of the same values may disagree by at its ends (:data:`~..results.tolerances.RELATIVE` of
    their magnitude: the extremes of one tensor from two implementations)."""
    slack = tolerances.RELATIVE[torch.float32] * max(abs(theirs.minimum), abs(theirs.maximum))
    return max(low - theirs.minimum - slack, theirs.maximum - high - slack, 0.0)


def _first(figures: list[tuple[float, str]], bound: float) -> str:
    """The first site (in data-flow order) whose figure exceeds ``bound``, else ``""``."""
    return next((name for value, name in figures if value > bound), "")


GROUP = CheckGroup(
    name="quantization",
    order=10,
    describe="an integer profile's every site against a second implementation: weights vs torchao, "
    "activation ranges vs HF's in the same scheme",
    rows=quantization_rows,
    reads=(CALIBRATION, OBSERVED_RANGES),
    profiles=("integer",),
)
