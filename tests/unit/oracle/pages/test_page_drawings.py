"""The report pages drawn from fixed synthetic reports, byte for byte against the pages reviewed in a
browser (``__snapshots__/test_page_drawings/``, open them to see what is pinned). The other page tests
assert what each element means; these catch what they leave free: a coordinate, a label, a class,
a heading, a cell's number. After a change meant to alter a page: ``pytest --snapshot-update`` on
this file, then look at the new pages before committing them."""

from __future__ import annotations

import pytest
import torch

from gemma4_static.oracle.pages import svg
from gemma4_static.oracle.pages.compare import compare_reports
from gemma4_static.oracle.pages.compare_page import compare_page
from gemma4_static.oracle.pages.verify_page import verify_page
from gemma4_static.oracle.results.diagrams import mask_diagram
from gemma4_static.oracle.results.figures import grid_cell, layer_points, position_points
from gemma4_static.oracle.results.report import Row
from tests.unit.oracle.pages.page_snapshot import PageSnapshot
from tests.unit.oracle.pages.synthetic_reports import BEFORE, report_row, synthetic_document, synthetic_report


@pytest.fixture
def page_snapshot(snapshot):
    return snapshot.use_extension(PageSnapshot)


SHARDS = [
    {"shard": 0, "examples": 4, "seconds": 2.0, "failure": "logits leave HF's at step 2", "expected": None,
     "reproduction": "/tmp/repro/reproduce.py"},
    {"shard": 1, "examples": 9, "seconds": 3.5, "failure": None, "expected": None, "reproduction": None},
    {"shard": 2, "examples": 2, "seconds": 1.0, "failure": "row 1 position 3 leaves HF's", "expected": "known",
     "reproduction": None},
]  # fmt: skip
GROUPS = [{"group": name, "kl_mean": kl} for name, kl in (("layer 0", 0.003), ("vision", 0.002), ("lm_head", 0.001))]
SWEEP = {"scheme": "a16w8", "baseline": {"kl_mean": 0.005}, "ranked": {"only": GROUPS, "all but": GROUPS}}


def _two_rows_differ() -> Row:
    """A failing mask row whose diagram has two query rows, a key wrong in each."""
    ours = torch.tril(torch.ones(1, 1, 5, 5, dtype=torch.bool))
    theirs = ours.clone()
    theirs[0, 0, 3, 0] = theirs[0, 0, 4, 1] = False
    detail = mask_diagram(ours, theirs, torch.ones(1, 5, dtype=torch.bool), "masks decode sliding_attention")
    return Row("masks decode", "sliding_attention, step 2", "mismatched entries", 2, 0, detail, group="decode-masks")


def test_the_verify_page_with_every_picture(page_snapshot):
    """Rows of each status, mask diagrams of one and two rows, the layer and position plots, the
    grid, a fuzz shard of each status and the sensitivity chart."""
    document = synthetic_document(more=(_two_rows_differ(),)) | {"fuzz": SHARDS, "sensitivity": SWEEP}
    document["figures"]["grid"] += [  # a passing cell in each shade, one at its gate
        grid_cell(9, schedule, f"[{index}]", "pass", value=value, tolerance=5e-4)
        for index, (schedule, value) in enumerate(
            [("policy", 1e-8), ("chunks of 1", 2.5e-6), ("chunks of 2W", 6e-5), ("chunks of 3", 5e-4)]
        )
    ]
    assert verify_page(document) == page_snapshot


def _low_precision_figures() -> dict:
    """Figures at the plots' edges: 12 layers in two metrics (SQNR drawn; HF's own worse than the gate
    at one layer, ten times further than ours ever is; ours failing at another; one layer that
    compared nothing and one NaN), four batch rows of positions starting at 3 (row 0 with 80 points,
    the most a line draws dots for) and a grid row with a schedule missing between two it has."""
    layers = [
        [
            Row(
                "decoder layers",
                f"layer {i}",
                "SQNR dB",
                40.0 - i,
                30.0,
                higher_is_better=True,
                hf=5.0 if i == 3 else 41.0 - i,
            ),
            Row("decoder layers", f"layer {i}", "max abs diff", 1e-5 * (i + 1), 1e-4),
        ]
        for i in range(12)
    ]
    layers[7][0] = Row("decoder layers", "layer 7", "SQNR dB", 20.0, 30.0, higher_is_better=True, hf=33.0)
    points = layer_points(layers)
    points[2] = points[2] | {"value": None, "status": "SKIP"}  # layer 1: no mark, its line goes around it
    points[18] = points[18] | {"value": None, "status": "FAIL"}  # layer 9: NaN, a cross at the top
    places = [[0, p] for p in range(3, 83)] + [[row, p] for row in (1, 2, 3) for p in (3, 4, 5)]
    errors = [1e-4 * (1 + p % 7) for p in range(80)] + [2e-4, 3e-3, 1e-4] * 3
    cells = [
        grid_cell(5, "policy", "[5]", "pass", value=1e-5, tolerance=5e-4),
        grid_cell(7, "chunks of 1", "[1 x 7]", "pass", value=1e-5, tolerance=5e-4),
        grid_cell(5, "chunks of 2W", "[12]", "fail", value=1e-2, tolerance=5e-4, first="position 3"),
    ]
    return {"layers": points, "positions": position_points(places, errors, 1e-3), "grid": cells}


def test_the_verify_page_of_a_recorded_reference_merged_from_shards(page_snapshot):
    """A run judged from a recorded reference, merged from two shards, its plots at their edges
    (:func:`_low_precision_figures`)."""
    document = synthetic_document(failing=False) | {
        "reference": {"describe": "tiny float32 <recorded 2026-12-03>"},
        "merged": {"shards": ["shard 1 of 2", "shard 2 of 2"]},
    }
    document["figures"] = _low_precision_figures()
    assert verify_page(document) == page_snapshot


def _kinds(kind_values: dict[str, tuple]) -> dict:
    return synthetic_report(
        [report_row(stage, "c", "max abs diff", value, 1e-4, status) for stage, (value, status) in kind_values.items()]
    )


A = {"newly failing": (1e-5, "PASS"), "worse": (1e-5, "PASS"), "better": (4e-5, "PASS"), "fixed": (3e-4, "FAIL"),
     "no longer compared": (1e-5, "PASS"), "same": (2e-5, "PASS")}  # fmt: skip
B = {"newly failing": (3e-4, "FAIL"), "worse": (8e-5, "PASS"), "better": (1e-5, "PASS"), "fixed": (2e-5, "PASS"),
     "newly compared": (1e-5, "PASS"), "same": (2e-5, "PASS")}  # fmt: skip


def test_the_compare_page_with_every_kind_of_change(page_snapshot):
    """Each kind a stage of its own name, so each section of the page holds one row."""
    assert compare_page(compare_reports(_kinds(A), _kinds(B)), ("before.json", "after.json")) == page_snapshot


def test_the_compare_page_of_a_run_against_itself(page_snapshot):
    assert compare_page(compare_reports(BEFORE, BEFORE), ("run.json", "run.json")) == page_snapshot


def test_a_bar_chart_without_a_reference_line(page_snapshot):
    """The longest bar spans the chart, no dashed line (the picture as a page holds it, inline)."""
    assert svg.bar_chart([("layer 0", 0.003), ("vision", 0.001)], "mean KL") == page_snapshot
