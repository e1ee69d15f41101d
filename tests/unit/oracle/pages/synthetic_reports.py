"""Synthetic reports for the page tests: a verify run's document with every kind of row and picture,
and two small reports to compare. Fixed numbers, so a page drawn from them is the same on every machine."""

from __future__ import annotations

import math

from gemma4_static.oracle.flow.verify import MINIMUM, NAMED
from gemma4_static.oracle.results.diagrams import mask_diagram
from gemma4_static.oracle.results.figures import grid_cell, layer_points, position_points
from gemma4_static.oracle.results.report import Row
from gemma4_static.oracle.results.report_json import report_document
from gemma4_static.oracle.results.verdict import Verdict

RUN = {
    "port": {"name": "my-npu", "version": "0.1"},
    "model": "tiny",
    "profile": "float32",
    "backend": "torch",
    "kernel_set": "ATen AVX2",
    "versions": {"python": "3.11", "gemma4-static": "0.1.0", "torch": "2.13", "transformers": "5.24"},
    "cpu": {"name": "test CPU", "aten_capability": "AVX2", "flags": []},
    "seeds": {"sample prompt": 0},
    "date": "2026-12-03T10:00:00+00:00",
}


def mask_detail(label: str = "masks prefill sliding_attention") -> str:
    """A failing mask row's diagram under ``label``: HF's window one key shorter at query 3."""
    import torch

    ours = torch.tril(torch.ones(1, 1, 4, 4, dtype=torch.bool))
    theirs = ours.clone()
    theirs[0, 0, 3, 0] = False  # a window one key shorter
    return mask_diagram(ours, theirs, torch.ones(1, 4, dtype=torch.bool), label)


def synthetic_document(*, failing: bool = True, incomplete: str | None = None, more: tuple[Row, ...] = ()) -> dict:
    """A verify run's document: rows of each status (a failing mask with its diagram unless not
    ``failing``), ``more`` rows after them, the layer, position and grid figures; its counts and
    coverage computed from its rows as ``verify`` computes them."""
    rows = [
        Row("masks prefill", "full_attention eager", "mismatched entries", 0, 0, group="prefill-masks"),
        Row(
            "masks prefill",
            "sliding_attention eager <script>",
            "mismatched entries",
            1 if failing else 0,
            0,
            detail=mask_detail() if failing else "",
            group="prefill-masks",
        ),
        Row("decoder layers", "layers 0-4 hidden states", "max abs diff", 2e-5, 1e-4, group="layers"),
        Row("prefill logits", "placeholders", "max abs diff", 27.0, 5e-4, expected="documented", group="decode"),
        Row("decode steps", "1 rows x 15 steps", "max abs diff", math.nan, 5e-4, group="decode"),
        Row("generation", "matched prefix", "matched prefix", 15, math.inf, group="decode"),
        Row("export", "the rest of this group", "not checked", math.nan, math.nan, skipped="no export", group="export"),
        *more,
    ]
    figures = {
        "layers": layer_points(
            [[Row("decoder layers", f"layer {i}", "max abs diff", 1e-5 * i, 1e-4)] for i in range(5)]
        ),
        "positions": position_points([[0, 0], [0, 1], [1, 0]], [1e-5, 2e-3, 0.0], 1e-3),
        "grid": [
            grid_cell(5, "policy", "[5]", "pass", value=1e-5, tolerance=5e-4),
            grid_cell(5, "chunks of 1", "[1 x 5]", "fail", value=1e-2, tolerance=5e-4, first="position 3"),
            grid_cell(7, "policy", "[7]", "raised", first="IndexError: out of range"),
            grid_cell(7, "chunks of 1", "[1 x 7]", "refused"),
            grid_cell(7, "chunks of 2W", "[12]", "over budget"),
        ],
    }
    extra = {"figures": figures} | ({"incomplete": incomplete} if incomplete else {})
    return report_document(
        Verdict.of(rows, num_layers=10, layers_compared=10, minimum=MINIMUM, named=NAMED), RUN, extra
    )


def report_row(stage: str, check: str, metric: str, value: float, tolerance: float, status: str, **more) -> dict:
    return {"stage": stage, "check": check, "metric": metric, "value": value, "tolerance": tolerance,
            "status": status, "higher_is_better": False, **more}  # fmt: skip


def synthetic_report(rows: list[dict]) -> dict:
    """A report of ``rows`` (:func:`report_row`), its counts and verdict as ``verify --json`` writes them."""
    counts = {
        status: sum(row["status"] == status for row in rows) for status in ("PASS", "FAIL", "XFAIL", "SKIP", "INFO")
    }
    passed = counts["FAIL"] == 0
    return {"schema_version": 1, "model": "tiny", "passed": passed, "exit_code": int(not passed), "metadata": RUN,
            "rows": rows, "counts": counts}  # fmt: skip


BEFORE = synthetic_report([
    report_row("decode steps", "1 rows x 15 steps", "max abs diff", 1e-4, 5e-4, "PASS"),
    report_row("schedules", "prompt 7: 5 schedules, 2 decode steps", "max abs diff", 1e-4, 5e-4, "PASS"),
    report_row("layers", "SQNR", "SQNR dB", 40.0, 30.0, "PASS", higher_is_better=True),
    report_row("masks", "sliding", "mismatched entries", 0, 0, "PASS"),
])  # fmt: skip
AFTER = synthetic_report([
    report_row("decode steps", "1 rows x 15 steps [first: step 3]", "max abs diff", 2e-4, 5e-4, "PASS"),
    report_row("schedules", "prompt 7: 3 schedules, 2 decode steps", "max abs diff", 1e-4, 5e-4, "PASS"),
    report_row("layers", "SQNR", "SQNR dB", 37.0, 30.0, "PASS", higher_is_better=True),
    report_row("masks", "sliding [first: row 2]", "mismatched entries", 4, 0, "FAIL"),
    report_row("RoPE", "full", "max abs diff", 0.0, 2.5e-7, "PASS"),
])  # fmt: skip
