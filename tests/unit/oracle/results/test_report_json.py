"""The report's JSON is strict: every non-finite float, at any depth (a row's value, a figure in an
extra section), is written as ``null``, so ``write_report`` (``allow_nan=False``) never refuses it."""

from __future__ import annotations

import json
import math

from gemma4_static.oracle.flow.verify import verdict_over
from gemma4_static.oracle.results.report import Row
from gemma4_static.oracle.results.report_json import report_document, run_metadata, write_report


def test_every_non_finite_number_is_written_as_null(tmp_path):
    rows = [Row("prefill logits", "last valid token per row", "max abs diff", math.nan, 1e-4)]
    run = run_metadata(port=("p", "0"), model="tiny", profile="float32", backend="torch", kernel_set="x", seeds={})
    extra = {"figures": {"grid": [{"value": math.inf, "tolerance": 1.0, "points": (-math.inf, 2.5)}]}}
    document = report_document(verdict_over(rows, 10), run, extra)
    assert document["rows"][0]["value"] is None and document["rows"][0]["tolerance"] == 1e-4
    assert document["figures"]["grid"] == [{"value": None, "tolerance": 1.0, "points": [None, 2.5]}]
    write_report(tmp_path / "report.json", document)
    text = (tmp_path / "report.json").read_text()
    assert json.loads(text)["figures"] == document["figures"]
    assert text.endswith("}\n") and text.splitlines()[1].startswith('  "')  # indented: two reports diff line by line
