"""The suite's reader of ``verify --json`` reports (``tests/reports.py``) is as strict as it says: a
report as the package writes it is read; a row's unknown status, a date that is no RFC 3339
date-time (its format checked: ``rfc3339-validator`` installed with the test extra) and a
non-standard JSON constant are each refused."""

from __future__ import annotations

import json

import jsonschema
import pytest

from gemma4_static.oracle.flow.verify import verdict_over
from gemma4_static.oracle.results.report import Row
from gemma4_static.oracle.results.report_json import report_document, run_metadata
from tests.reports import read_report


def _report() -> dict:
    run = run_metadata(
        port=("gemma4-static", "0"), model="tiny", profile="float32", backend="torch", kernel_set="x", seeds={}
    )
    rows = [Row("RoPE", "full_attention float32", "max abs diff", 0.0, 1.0, group="rope")]
    return report_document(verdict_over(rows, 2), run)


def test_a_report_as_written_is_read_and_each_break_of_it_refused(tmp_path):
    path = tmp_path / "report.json"
    path.write_text(json.dumps(_report()))
    assert read_report(path)["rows"][0]["status"] == "PASS"
    for change, refused in (
        (lambda report: report["rows"][0].update(status="MAYBE"), "'MAYBE' is not one of"),
        (lambda report: report["metadata"].update(date="yesterday"), "'yesterday' is not a 'date-time'"),
    ):
        report = _report()
        change(report)
        path.write_text(json.dumps(report))
        with pytest.raises(jsonschema.ValidationError, match=refused):
            read_report(path)
    path.write_text(json.dumps(_report()).replace('"value": 0.0', '"value": NaN', 1))
    with pytest.raises(ValueError, match="non-standard JSON constant NaN"):
        read_report(path)
