"""What a report draws, beside its rows: the per-layer error across the decoder stack (every layer,
before the rows merge them in groups), the logits' error per position (float32, where a port
exposes every position's logits) and the schedules grid cell by cell (prompt length by
schedule, refused and over-budget cases included). Plain JSON values (the report's ``figures``
section, :mod:`..pages` draws them); each value relative to its gate is ``relative`` (at most 1
inside it, ``None`` where nothing was compared)."""

from __future__ import annotations

import math
from typing import Any

from .report import Row

GRID_OUTCOMES = ("pass", "fail", "raised", "refused", "over budget")


def relative_to_gate(value: float, tolerance: float, higher_is_better: bool) -> float | None:
    """How far ``value`` lies toward its gate: ``value / tolerance`` for an error, for a figure in dB
    (higher is better) the error amplitude it stands for over the gate's, ``10^((gate - value) / 20)``;
    ``None`` for a value that is not a number or an ungated (or zero) tolerance."""
    if not (math.isfinite(value) and math.isfinite(tolerance)):
        return None
    if higher_is_better:
        return 10 ** ((tolerance - value) / 20)
    if tolerance == 0:
        return None if value else 0.0
    return value / tolerance


def layer_points(layers: list[list[Row]]) -> list[dict[str, Any]]:
    """``layers[i]``: layer ``i``'s rows (one per metric) as points of the per-layer plot."""
    return [
        {
            "layer": index,
            "metric": row.metric,
            "value": row.value,
            "tolerance": row.tolerance,
            "hf": row.hf,
            "higher_is_better": row.higher_is_better,
            "status": row.status,
        }
        for index, rows in enumerate(layers)
        for row in rows
    ]


def position_points(places: list[list[int]], errors: list[float], tolerance: float) -> list[dict[str, Any]]:
    """The logits' largest error at each valid ``(row, position)`` of ``places`` against the row's
    ``tolerance``, as points of the per-position plot."""
    return [
        {
            "row": row,
            "position": position,
            "metric": "max abs diff",
            "value": error,
            "tolerance": tolerance,
            "hf": None,
            "higher_is_better": False,
            "status": "PASS" if error <= tolerance else "FAIL",
        }
        for (row, position), error in zip(places, errors, strict=True)
    ]


def grid_cell(
    length: int,
    schedule: str,
    chunks: str,
    outcome: str,
    *,
    value: float = math.nan,
    tolerance: float = math.nan,
    higher_is_better: bool = False,
    first: str | None = None,
) -> dict[str, Any]:
    """One cell of the schedules grid: a prompt ``length`` fed in ``chunks`` (the ``schedule``'s name),
    its ``outcome`` (:data:`GRID_OUTCOMES`), the worst value against its gate and where it first
    diverged."""
    if outcome not in GRID_OUTCOMES:
        raise ValueError(f"outcome must be one of {GRID_OUTCOMES}, got {outcome!r}")
    return {
        "length": length,
        "schedule": schedule,
        "chunks": chunks,
        "outcome": outcome,
        "value": value,
        "tolerance": tolerance,
        "higher_is_better": higher_is_better,
        "relative": relative_to_gate(value, tolerance, higher_is_better),
        "first": first,
    }
