"""The report pages drawn from fixed synthetic reports, byte for byte against the pages reviewed in a
browser (``__snapshots__/test_page_drawings/``, open them to see what is pinned). The other page tests
assert what each element means; these catch what they leave free: a coordinate, a label, a class,
a heading, a cell's number. After a change meant to alter a page: ``pytest --snapshot-update`` on
this file, then look at the new pages before committing them."""

from __future__ import annotations

import pytest
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from gemma4_static.oracle.pages.compare import compare_reports
from gemma4_static.oracle.pages.compare_page import compare_page
from gemma4_static.oracle.pages.verify_page import verify_page
from tests.unit.oracle.pages.synthetic_reports import AFTER, BEFORE, synthetic_document


class PageSnapshot(SingleFileSnapshotExtension):
    """One HTML file per test: a page a reviewer opens as it is."""

    file_extension = "html"
    _write_mode = WriteMode.TEXT


@pytest.fixture
def page_snapshot(snapshot):
    return snapshot.use_extension(PageSnapshot)


SHARD = {"shard": 0, "examples": 4, "seconds": 2.0, "failure": "logits leave HF's at step 2", "expected": None,
         "reproduction": "/tmp/repro/reproduce.py"}  # fmt: skip
GROUPS = [{"group": name, "kl_mean": kl} for name, kl in (("layer 0", 0.003), ("vision", 0.002), ("lm_head", 0.001))]
SWEEP = {"scheme": "a16w8", "baseline": {"kl_mean": 0.005}, "ranked": {"only": GROUPS, "all but": GROUPS}}


def test_the_verify_page_with_every_picture(page_snapshot):
    """Rows of each status, the mask diagram, the layer and position plots, the grid, a fuzz shard and
    the sensitivity chart."""
    assert verify_page(synthetic_document() | {"fuzz": [SHARD], "sensitivity": SWEEP}) == page_snapshot


def test_the_compare_page_with_every_kind_of_change(page_snapshot):
    assert compare_page(compare_reports(BEFORE, AFTER), ("before.json", "after.json")) == page_snapshot
