"""The parts the report pages are made of, read as text: a row's gate as the terminal prints it, the
run's provenance (each fact under its name, ``?`` for one the report lacks), a failure's notes and
the comparison page's two runs with their verdicts."""

from __future__ import annotations

import re

import pytest

from gemma4_static.oracle.pages.compare import Change
from gemma4_static.oracle.pages.compare_page import _change, _changes, _runs
from gemma4_static.oracle.pages.layout import gate_text, provenance
from gemma4_static.oracle.pages.verify_page import _notes
from tests.unit.oracle.pages.synthetic_reports import RUN


@pytest.mark.parametrize(
    ("row", "text"),
    [
        ({"status": "PASS", "tolerance": 5e-4}, "<= 0.0005"),
        ({"status": "FAIL", "tolerance": 43.0, "higher_is_better": True}, ">= 43"),
        ({"status": "INFO", "tolerance": 1.0}, "not gated"),
        ({"status": "PASS", "tolerance": None}, "not gated"),
        ({"status": "SKIP", "tolerance": 5e-4}, ""),
    ],
    ids=["lower-is-better", "higher-is-better", "info", "ungated", "skipped"],
)
def test_a_rows_gate_reads_as_the_terminal_prints_it(row, text):
    assert gate_text(row) == text


def _facts(html: str) -> dict[str, str]:
    return dict(re.findall(r"<dt>([^<]*)</dt><dd>([^<]*)</dd>", html))


def test_the_provenance_names_each_fact_of_the_run():
    assert _facts(provenance({**RUN, "versions": {"torch": "2.13", "tico": None}})) == {
        "port": "my-npu 0.1",
        "model": "tiny",
        "profile": "float32",
        "backend": "torch",
        "kernel set": "ATen AVX2",
        "CPU": "test CPU (ATen AVX2)",
        "versions": "torch 2.13, tico not installed",
        "seeds": "sample prompt 0",
        "date": "2026-12-03T10:00:00+00:00",
    }
    unknown = {"port": "?", "model": "?", "profile": "?", "backend": "?", "kernel set": "?", "CPU": "? (ATen ?)"}
    assert _facts(provenance({})) == unknown | {"versions": "", "seeds": "", "date": "?"}
    assert _facts(provenance({"port": {"name": "my-npu"}}))["port"] == "my-npu"  # no version: none printed


def test_a_checkpoints_run_names_its_seeds_its_size_and_its_memory():
    memory = {
        "checkpoint": {"parameters": 1_125_000_000, "stored_dtype": "bfloat16", "size_bytes": 2_250_000_001},
        "peak_resident_bytes": 3_000_000_000,
        "estimate_bytes": 4_000_000_000,
    }
    facts = _facts(provenance({"seeds": {"sample prompt": 0, "fuzz": 3}, "memory": memory}))
    assert facts["seeds"] == "sample prompt 0, fuzz 3"
    assert facts["checkpoint"] == "1.12 billion parameters stored in bfloat16 (2.3 GB)"  # 2.250000001 GB
    assert facts["memory"] == "peak resident 3.0 GB (1.33x the checkpoint; estimated 4.0 GB)"


def test_a_failures_notes_give_the_ports_documented_reason_its_detail_and_traceback():
    row = {"status": "XFAIL", "expected": "drops the PLE <table>", "detail": "first: layer 2", "raised": "Trace"}
    notes = _notes(row)
    assert "<p>documented by the port: drops the PLE &lt;table&gt;</p>" in notes
    assert "<summary>detail</summary><pre>first: layer 2</pre>" in notes and "<pre>Trace</pre>" in notes
    assert _notes({**row, "status": "PASS"}) == ""


def test_the_compared_runs_each_carry_their_own_verdict():
    def run(passed: bool) -> dict:
        metadata = {"port": {"name": "gemma4-static"}, "profile": "float32"}
        return {"metadata": metadata, "passed": passed, "model": "tiny", "counts": {"PASS": 3}}

    lines = _runs(run(True), run(False), ("a.json", "b.json")).split("</li>")
    assert '<span class="badge PASS">passed</span>' in lines[0] and "FAIL" not in lines[0]
    assert '<span class="badge FAIL">failed</span>' in lines[1] and "badge PASS" not in lines[1]


@pytest.mark.parametrize(
    ("kind", "css"),
    [("newly failing", "worse"), ("worse", "worse"), ("better", "better"), ("fixed", "better"),
     ("no longer compared", "gone"), ("newly compared", "new")],
)  # fmt: skip
def test_each_kind_of_change_is_painted_as_what_it_means(kind, css):
    section = _changes(kind, [])
    assert section.startswith(
        f'<section id="kind-{kind.replace(" ", "-")}"><h2><span class="badge {css}">{kind}</span> 0 rows'
    )


def test_a_change_row_shows_each_side_and_the_loss_where_there_is_one():
    a = {"status": "PASS", "value": 1e-5, "tolerance": 5e-4}
    skipped = {"status": "SKIP", "value": None, "tolerance": None}
    worse = Change("prefill logits", "last valid token per row", "max abs diff", a, {**a, "value": 1e-4}, "worse", 20.0)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", _change(worse))
    assert cells[3:] == [
        '<span class="badge PASS">PASS</span> 1e-05 (&lt;= 0.0005)',
        '<span class="badge PASS">PASS</span> 0.0001 (&lt;= 0.0005)',
        "+20.0 dB",
    ]
    gone = Change("circle", "the rest of this group", "not checked", a, skipped, "no longer compared", None)
    assert re.findall(r"<td[^>]*>(.*?)</td>", _change(gone))[4:] == ['<span class="badge SKIP">SKIP</span>', ""]
