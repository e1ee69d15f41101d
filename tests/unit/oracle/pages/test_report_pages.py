"""The report pages without a browser (the browser lane renders them: tests/unit/oracle/pages/test_report_browser.py):
the verify page's rows, counts, first divergence, pictures and self-containment against its JSON
document; the comparison's matching, losses, verdict and exit codes; their bad input."""

from __future__ import annotations

import json
import math
import re
from html import escape
from html.parser import HTMLParser

import pytest

from gemma4_static.commands import cli
from gemma4_static.oracle.pages.compare import (
    KINDS,
    case_of,
    compare_reports,
    error_text,
    load_report,
    severity,
    summary_lines,
)
from gemma4_static.oracle.pages.compare_page import compare_page
from gemma4_static.oracle.pages.verify_page import verify_page
from gemma4_static.oracle.results.figures import grid_cell, layer_points, position_points, relative_to_gate
from gemma4_static.oracle.results.report import Row
from tests.unit.oracle.pages.synthetic_reports import (
    AFTER,
    BEFORE,
    mask_detail,
    report_row,
    synthetic_document,
    synthetic_report,
)


class Elements(HTMLParser):
    """Every start tag with its attributes, in document order."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def having(self, tag: str, **attributes: str) -> list[dict[str, str | None]]:
        return [
            attrs for name, attrs in self.tags if name == tag and all(attrs.get(k) == v for k, v in attributes.items())
        ]


def test_the_page_holds_every_row_with_its_status_and_the_counts_of_the_json():
    document = synthetic_document()
    page = verify_page(document)
    elements = Elements(page)
    for status, count in document["counts"].items():
        assert len(elements.having("tr", **{"data-status": status})) == count, status
    assert re.search(r'id="verdict">verdict: failed \(exit 1\)<', page)
    assert "&lt;script&gt;" in page and "<script" not in page  # text escaped, no script at all
    skipped = [row for row in document["rows"] if row["status"] == "SKIP"]
    assert skipped and all(f"{escape(row['check'])}: {escape(row['skipped'])}</td>" in page for row in skipped)


def test_the_first_divergence_is_the_first_failing_row_and_is_linked():
    document = synthetic_document()
    elements = Elements(verify_page(document))
    (first,) = elements.having("tr", id="first-divergence")
    assert first["data-status"] == "FAIL" and elements.having("a", href="#first-divergence")
    rows = [attrs for name, attrs in elements.tags if name == "tr" and "data-status" in attrs]
    assert rows.index(first) == next(i for i, row in enumerate(document["rows"]) if row["status"] == "FAIL")
    page = verify_page(document)
    assert page.count("<b>(first divergence)</b>") == 1  # the row's words, as the terminal's marker says them
    passing = verify_page(
        synthetic_document(failing=False) | {"rows": [r for r in document["rows"] if r["status"] != "FAIL"]}
    )
    assert 'id="first-divergence"' not in passing and "No row failed." in passing


def test_the_pictures_draw_the_figures_and_the_failing_mask():
    page = verify_page(synthetic_document())
    elements = Elements(page)
    cells = elements.having("g", **{"class": "cell"})
    assert [cell["data-outcome"] for cell in cells] == ["pass", "fail", "raised", "refused", "over budget"]
    assert page.count('class="dot"') == 5 + 2  # a point per layer, and per passing position
    assert page.count('class="fail-mark"') == 1  # the position past its gate
    assert len(elements.having("polyline", **{"class": "series ours line-1"})) == 1  # the second row's line
    assert elements.having("rect", **{"class": "differ"})  # the key the masks disagree on, drawn


def test_the_page_is_self_contained():
    page = verify_page(synthetic_document())
    assert not re.search(r"""(src|href)=["'](?!#)""", page), "only anchors inside the page are linked"
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "") and "https://" not in page
    assert "@import" not in page and "url(" not in page


def test_the_verdict_reads_as_the_terminals_last_line():
    nothing = synthetic_document(failing=False) | {"exit_code": 5, "passed": False, "missing": ["decode steps"]}
    assert 'id="verdict">verdict: nothing failed, but decode steps not compared (exit 5)<' in verify_page(nothing)


def test_a_passing_run_says_so_and_a_run_that_missed_the_minimum_names_what_it_missed():
    document = synthetic_document(failing=False)
    rows = [row for row in document["rows"] if row["status"] != "FAIL"]
    passing = verify_page(document | {"rows": rows, "passed": True, "exit_code": 0})
    assert '<p class="verdict passed" id="verdict">' in passing and "\n<p>No row failed.</p>\n" in passing
    assert "not compared (the minimum)" not in passing
    missing = {"exit_code": 5, "passed": False, "missing": ["decode steps", "generation"]}
    page = verify_page(document | missing)
    assert '<p class="verdict failed" id="verdict">' in page
    assert "\n<p>not compared (the minimum): decode steps, generation</p>\n" in page


def test_each_row_shows_hfs_own_figure_where_it_was_measured():
    row = Row("decoder layers", "layer 2 hidden states", "SQNR dB", 31.5, 30.0, hf=44.25, higher_is_better=True)
    page = verify_page(synthetic_document(more=(row,)))
    assert '<td class="num">31.5</td><td class="num">&gt;= 30</td><td class="num hide-narrow">44.25</td>' in page


def test_the_layer_plot_draws_max_abs_diff_before_any_other_metric_and_else_the_first_measured():
    def plotted(*metrics: str) -> str:
        layers = [[Row("decoder layers", f"layer {i}", metric, 1e-5, 1e-4) for metric in metrics] for i in range(3)]
        page = verify_page(synthetic_document() | {"figures": {"layers": layer_points(layers)}})
        return re.search(r'<p class="legend">([^<]+) relative to its gate', page)[1]

    assert plotted("cosine similarity", "max abs diff") == "max abs diff"
    assert plotted("cosine similarity", "mean KL") == "cosine similarity"


def test_a_groups_anchor_is_its_name_in_lower_case_words_joined_by_dashes():
    row = Row("own checks", "the port's own", "max abs diff", 0.0, 1e-4, group="(Own) checks!")
    page = verify_page(synthetic_document(more=(row,)))
    assert '<section id="group-own-checks">' in page and '<a href="#group-own-checks">' in page


def test_a_row_where_the_port_raised_shows_its_traceback_under_its_label():
    raised = "Traceback (most recent call last):\nValueError: position 9 past max_seq"
    row = Row("decode steps", "the port raised", "max abs diff", math.nan, 5e-4, raised=raised, group="decode")
    page = verify_page(synthetic_document(more=(row,)))
    assert f"<details open><summary>traceback</summary><pre>{escape(raised)}</pre></details>" in page


def test_a_mask_diagrams_keys_are_the_last_part_of_its_first_line():
    detail = mask_detail("masks chunk sliding_attention; chunk 2")
    row = Row("masks chunk", "sliding_attention; chunk 2", "mismatched entries", 1, 0, detail=detail)
    page = verify_page(synthetic_document(more=(row,)))
    assert page.count(">mask rows, keys 0..3<") == 2  # the synthetic document's mask and this one


def test_an_interrupted_run_says_so_on_top():
    page = verify_page(synthetic_document(incomplete="interrupted after 7 rows"))
    assert 'id="incomplete">incomplete: interrupted after 7 rows<' in page


def test_a_grid_cell_names_its_outcome():
    with pytest.raises(ValueError, match=r"outcome must be one of .*, got 'skipped'"):
        grid_cell(1, "policy", "[1]", "skipped")
    assert relative_to_gate(20.0, 26.0, True) == pytest.approx(2.0, rel=3e-3)  # 6 dB below the gate: twice the error
    assert relative_to_gate(1e-4, 5e-4, False) == pytest.approx(0.2) and relative_to_gate(math.nan, 1.0, False) is None
    # an exact gate (0): an exact value sits at 0, any error off the scale (None), an infinite gate too
    assert relative_to_gate(0.0, 0.0, False) == 0.0 and relative_to_gate(3.0, 0.0, False) is None
    assert relative_to_gate(1.0, math.inf, False) is None


def test_compare_matches_rows_by_stage_case_and_metric_and_measures_the_loss_in_db():
    comparison = compare_reports(BEFORE, AFTER, threshold_db=6.5)
    kinds = {change.stage: change for change in comparison.changes}
    assert kinds["decode steps"].kind == "worse" and kinds["decode steps"].loss_db == pytest.approx(6.02, abs=0.01)
    assert kinds["layers"].kind == "worse" and kinds["layers"].loss_db == pytest.approx(3.0)
    assert kinds["schedules"].kind == "same"  # a port's limits change how many schedules, not the case
    assert kinds["masks"].kind == "newly failing" and kinds["RoPE"].kind == "newly compared"
    assert [change.stage for change in comparison.regressions] == ["masks"]  # 6.02 dB is within 6.5
    assert [change.stage for change in compare_reports(BEFORE, AFTER, 6.0).regressions] == ["decode steps", "masks"]
    assert comparison.stage_losses()[0].stage == "decode steps"


def test_compare_severity_reads_each_metric_as_an_error_relative_to_its_gate():
    assert severity(report_row("s", "c", "cosine", 0.99, 0.9, "PASS", higher_is_better=True)) == pytest.approx(0.1)
    assert severity(report_row("s", "c", "matched prefix", 15, None, "INFO")) is None  # a count, not an error
    assert severity(report_row("s", "c", "max abs error", 0.5, None, "INFO")) == 0.5
    assert severity(report_row("s", "c", "not checked", None, None, "SKIP")) is None


def test_compare_command_exit_codes_and_page(tmp_path, capsys):
    before, after, page = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.html"
    before.write_text(json.dumps(BEFORE))
    after.write_text(json.dumps(AFTER))
    assert cli.main(["compare", str(before), str(after), "--html", str(page)]) == 1
    printed = capsys.readouterr().out
    assert "rows newly failing: 1" in printed and "compare: regressed: 2 rows, 1 stage (exit 1)" in printed
    elements = Elements(page.read_text())
    assert len(elements.having("tr", **{"data-kind": "newly failing"})) == 1
    assert cli.main(["compare", str(before), str(before)]) == 0
    assert capsys.readouterr().out.rstrip().endswith("compare: no regression (exit 0)")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", r"report '.*a\.json' cannot be read as JSON"),
        ('{"schema_version": 2, "rows": []}', r"report '.*a\.json' is not a verify report \(schema version 1"),
        ("[1, 2]", r"report '.*a\.json' is not a verify report"),
    ],
)
def test_compare_refuses_what_is_not_a_report(tmp_path, content, message, capsys):
    path = tmp_path / "a.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=message):
        load_report(path)
    assert cli.main(["compare", str(path), str(path)]) == 2
    assert re.search(message, capsys.readouterr().err)


def test_compare_refuses_a_threshold_that_is_not_a_loss():
    with pytest.raises(ValueError, match=r"threshold_db must be a finite number >= 0 \(dB\), got -1"):
        compare_reports(BEFORE, AFTER, threshold_db=-1)
    with pytest.raises(ValueError, match=r"got nan"):
        compare_reports(BEFORE, AFTER, threshold_db=math.nan)


def test_the_compare_page_names_both_runs():
    page = compare_page(compare_reports(BEFORE, AFTER), ("before.json", "after.json"))
    assert "before.json" in page and "after.json" in page and 'id="verdict">regressed: 2 rows' in page


def test_the_plugin_writes_its_page_with_the_fuzzers_shards(pytester, tmp_path):
    """The plugin's ``--gemma4-html``: the rows of the groups run (here two, so the page says the
    session ran part of the flow) and the fuzzer's shard, from the tests' user properties."""
    page = tmp_path / "plugin.html"
    result = pytester.runpytest_inprocess(
        "-p", "gemma4_static.pytest_plugin", "--gemma4-port", "gemma4-static", "--gemma4-model", "tiny",
        "--gemma4-fuzz", "2", "--gemma4-fuzz-database", str(tmp_path / "db"), "--gemma4-html", str(page),
        "-k", "rope or fuzz",
    )  # fmt: skip
    result.assert_outcomes(passed=2)
    written = page.read_text()
    elements = Elements(written)
    assert 'id="incomplete">incomplete: 1 of 17 check groups ran' in written
    assert len(elements.having("tr", **{"data-status": "PASS"})) == 12  # the RoPE group's rows
    assert len(elements.having("tr", **{"data-fuzz": "PASS"})) == 1 and "no divergence" in written


def test_a_fuzz_shard_links_its_reproduction():
    shard = {"shard": 0, "examples": 4, "seconds": 2.0, "failure": "logits leave HF's at step 2", "expected": None,
             "reproduction": "/tmp/repro/reproduce.py"}  # fmt: skip
    page = verify_page(synthetic_document() | {"fuzz": [shard]})
    (row,) = Elements(page).having("tr", **{"data-fuzz": "FAIL"})
    assert row is not None and Elements(page).having("a", href="file:///tmp/repro/reproduce.py")
    fuzz = page.split('<section id="fuzz">')[1].split("</section>")[0]
    assert re.findall(r'<th scope="col">([^<]*)</th>', fuzz) == ["status", "shard", "examples", "seconds", "found"]
    cells = re.findall(r"<td[^>]*>(.*?)</td>", fuzz)
    assert cells[1:4] == ["0", "4", "2.0 s"] and cells[4].startswith("logits leave HF&#x27;s at step 2 <a href=")


def test_the_sensitivity_chart_has_a_bar_per_group():
    groups = [
        {"group": name, "kl_mean": kl} for name, kl in (("layer 0", 0.003), ("vision", 0.002), ("lm_head", 0.001))
    ]
    sweep = {"scheme": "a16w8", "baseline": {"kl_mean": 0.005}, "ranked": {"only": groups, "all but": groups}}
    page = verify_page(synthetic_document() | {"sensitivity": sweep})
    assert page.count('class="bar"') == 3 and "<title>layer 0: 0.003</title>" in page
    chart = page.split('<section id="sensitivity">')[1]
    assert re.search(r'<line x1="([\d.]+)" x2="\1" [^>]*class="gate"/>', chart)  # every group quantized, dashed


def _one(status: str | None, value=None, *, metric="max abs diff", tolerance=1e-4, **more) -> list[dict]:
    """A report's rows: one row of stage ``s``, case ``c`` (none where ``status`` is ``None``)."""
    return [] if status is None else [report_row("s", "c", metric, value, tolerance, status, **more)]


INFO = {"tolerance": None}
ABS, PEIR, PREFIX = ({"metric": metric, **INFO} for metric in ("max abs error", "PEIR", "matched prefix"))
KIND_CASES = [  # (A's row, B's row, the kind, B's loss in dB or None, a regression at 6 dB)
    (_one("PASS", 1e-5), _one("FAIL", 1e-3), "newly failing", 40.0, True),
    (_one("XFAIL", 1e-3, expected="known"), _one("FAIL", 1e-3), "newly failing", 0.0, True),
    (_one("FAIL", 1e-3), _one("PASS", 1e-5), "fixed", -40.0, False),
    (_one("FAIL", 1e-3), _one("XFAIL", 1e-3, expected="known"), "fixed", 0.0, False),
    (_one("FAIL", 1e-3), _one("SKIP", None, skipped="why"), "no longer compared", None, False),
    (_one("SKIP", None, skipped="why"), _one("PASS", 1e-5), "newly compared", None, False),
    (_one(None), _one("PASS", 1e-5), "newly compared", None, False),
    (_one("PASS", 1e-5), _one(None), "no longer compared", None, False),
    (_one("PASS", 1e-5), _one("PASS", 2.5e-5), "worse", 7.96, True),
    (_one("PASS", 1e-5), _one("PASS", 1.9e-5), "worse", 5.58, False),
    (_one("PASS", 2e-5), _one("PASS", 1e-5), "better", -6.02, False),
    (_one("PASS", 1e-5), _one("PASS", 1.02e-5), "same", 0.17, False),
    (_one("INFO", 0.1, **ABS), _one("INFO", 0.4, **ABS), "worse", 12.04, True),
    (_one("INFO", 0.01, **PEIR), _one("INFO", 0.001, **PEIR), "better", -20.0, False),
    (_one("INFO", 15, **PREFIX), _one("INFO", 3, **PREFIX), "same", None, False),
    (_one("PASS", 30.0, metric="SQNR dB", tolerance=20.0, higher_is_better=True),
     _one("PASS", 22.0, metric="SQNR dB", tolerance=20.0, higher_is_better=True), "worse", 8.0, True),
    (_one("SKIP", None, skipped="why"), _one("SKIP", None, skipped="why"), "same", None, False),
]  # fmt: skip


@pytest.mark.parametrize(("a", "b", "kind", "loss", "regression"), KIND_CASES)
def test_compare_judges_every_kind_of_row_pair(a, b, kind, loss, regression):
    """Every kind of change (INFO rows whose value is an error, counts that are not, ungated and SKIP
    rows included): its kind, B's loss in dB, and whether it regresses at 6 dB."""
    comparison = compare_reports(synthetic_report(a), synthetic_report(b), threshold_db=6.0)
    (change,) = comparison.changes
    assert change.kind == kind and (
        change.loss_db is None if loss is None else change.loss_db == pytest.approx(loss, abs=0.01)
    )
    assert (change in comparison.regressions) == regression
    assert set(KINDS) - {"same"} <= {case[2] for case in KIND_CASES}  # every kind of change has a case


def test_a_stages_largest_error_reads_info_errors_and_leaves_out_documented_divergences():
    a = synthetic_report(
        [
            *_one("PASS", 1e-5),
            report_row("s", "d", "max abs error", 2e-3, None, "INFO"),
            report_row("t", "c", "max abs diff", 1.0, 1e-4, "XFAIL", expected="known"),
        ]
    )
    b = synthetic_report(
        [
            *_one("PASS", 1e-5),
            report_row("s", "d", "max abs error", 8e-3, None, "INFO"),
            report_row("t", "c", "max abs diff", 9.0, 1e-4, "XFAIL", expected="known"),
        ]
    )
    (loss,) = compare_reports(a, b).stage_losses()
    assert (loss.stage, loss.a_error, loss.b_error) == ("s", 2e-3, 8e-3) and loss.loss_db == pytest.approx(
        12.04, abs=0.01
    )
    assert compare_reports(a, b, threshold_db=12.5).regressed_stages == [] and compare_reports(a, b, 12.0).regressed


def test_a_rows_case_is_its_check_without_what_a_run_varies():
    cases = {
        "layers 0-4 hidden states [first: layer 2]": "layers 0-4 hidden states",
        "prompt 20: 8 schedules, chunk ends, last token, 3 decode steps, vs float64": (
            "prompt 20: schedules, chunk ends, last token, 3 decode steps"
        ),
        "cases run: 44 (2 refused by the port's limits, 0 over the budget)": "cases run",
        "every valid position [worst: row 1 position 3]": "every valid position",
        "a check with 8 schedules inside, vs float64 [widest: x]": "a check with schedules inside",
    }
    assert {check: case_of({"check": check}) for check in cases} == cases


def test_severity_of_a_row_that_compared_nothing_is_none():
    assert (
        severity(report_row("s", "c", "max abs diff", 0.5, 1.0, "SKIP", skipped="why")) is None
    )  # a value, but skipped
    assert severity(report_row("s", "c", "max abs diff", None, 1.0, "FAIL")) is None  # a number that is not one


def test_each_change_keeps_both_rows_and_its_kind_at_the_half_db_edge():
    a, b = _one("PASS", 1e-5), _one("PASS", 1e-5 * 10 ** (0.6 / 20))
    (change,) = compare_reports(synthetic_report(a), synthetic_report(b)).changes
    assert change.kind == "worse" and change.loss_db == pytest.approx(0.6) and (change.a, change.b) == (a[0], b[0])
    (back,) = compare_reports(synthetic_report(b), synthetic_report(a)).changes
    assert back.kind == "better" and back.loss_db == pytest.approx(-0.6)


def test_exactly_half_a_db_is_a_change_and_just_under_it_is_not():
    a = _one("PASS", 1e-5)
    at_edge, under = 1e-5 * 10 ** (0.5 / 20), 1.0592537251772887e-05  # the float just under the edge's loss
    (change,) = compare_reports(synthetic_report(a), synthetic_report(_one("PASS", at_edge))).changes
    assert change.loss_db == 0.5 and change.kind == "worse"
    (change,) = compare_reports(synthetic_report(a), synthetic_report(_one("PASS", under))).changes
    assert change.loss_db < 0.5 and change.kind == "same"


def test_a_threshold_of_zero_is_a_threshold():
    assert compare_reports(BEFORE, AFTER, threshold_db=0).threshold_db == 0
    assert compare_reports(BEFORE, AFTER, threshold_db=0.5).regressed


def test_a_stage_that_lost_exactly_the_threshold_is_not_beyond_it():
    """Beyond means more than the threshold, for a stage as for a row."""
    loss = compare_reports(BEFORE, AFTER).stage_losses()[0]
    assert loss.stage == "decode steps" and loss.loss_db == pytest.approx(6.02, abs=0.01)
    at_threshold = compare_reports(BEFORE, AFTER, threshold_db=loss.loss_db)
    assert at_threshold.regressed_stages == []
    assert "beyond threshold" not in compare_page(at_threshold, ("a", "b"))
    assert "beyond threshold" in compare_page(compare_reports(BEFORE, AFTER, threshold_db=6.0), ("a", "b"))


def test_a_stages_largest_error_is_over_all_its_rows_failing_ones_included():
    a = synthetic_report(
        [
            report_row("s", "c", "max abs diff", 3e-3, 1e-4, "FAIL"),
            report_row("s", "d", "max abs diff", 1e-3, 1e-4, "FAIL"),
        ]
    )
    b = synthetic_report(
        [
            report_row("s", "c", "max abs diff", 1e-3, 1e-4, "FAIL"),
            report_row("s", "d", "max abs diff", 1e-3, 1e-4, "FAIL"),
        ]
    )
    (loss,) = compare_reports(a, b).stage_losses()
    assert (loss.a_error, loss.b_error) == (3e-3, 1e-3)


def test_the_terminal_summary_line_by_line():
    a = synthetic_report(
        [
            *_one("PASS", 1e-5),
            report_row("t", "d", "matched prefix", 15, None, "INFO"),
            report_row("u", "e", "max abs diff", 1e-5, 1e-4, "PASS"),
        ]
    )
    b = synthetic_report(
        [
            *_one("FAIL", 1e-3),
            report_row("t", "d", "matched prefix", 9, None, "INFO"),
            report_row("u", "e", "max abs diff", 1.2e-5, 1e-4, "PASS"),
        ]
    )
    lines = summary_lines(compare_reports(a, b, threshold_db=6.0), ("a.json", "b.json"))
    assert lines == [
        "compare: A = a.json, B = b.json; threshold 6 dB",
        "stages by the most B lost against A (largest absolute error, A -> B):",
        "     +40.0 dB  s (1e-05 -> 0.001)",
        "      +1.6 dB  u (1e-05 -> 1.2e-05)",
        "rows newly failing: 1",
        "  +40.0 dB PASS -> FAIL   s: c (max abs diff)",
        "rows worse: 1",
        "  +1.6 dB PASS -> PASS   u: e (max abs diff)",
        "compare: regressed: 1 row, 1 stage (exit 1)",
    ]
    assert error_text(1e-6) == "<= 1e-06" and error_text(5e-7) == "<= 1e-06" and error_text(2e-6) == "2e-06"


def test_the_of_kind_order_is_the_largest_change_first_a_row_without_a_loss_last():
    rows_a = [report_row("s", c, "max abs diff", 1e-5, 1e-4, "PASS") for c in "xyz"] + [
        report_row("m", "p", "matched prefix", 5, None, "INFO")
    ]
    after = {"x": 2e-5, "y": 8e-5, "z": 1e-5 * 10 ** (0.3 / 20)}  # z: 0.3 dB, the same
    rows_b = [report_row("s", c, "max abs diff", value, 1e-4, "PASS") for c, value in after.items()]
    rows_b.append(report_row("m", "p", "matched prefix", 2, None, "INFO"))
    comparison = compare_reports(synthetic_report(rows_a), synthetic_report(rows_b))
    assert [change.case for change in comparison.of_kind("worse")] == ["y", "x"]
    assert [change.case for change in comparison.of_kind("same")] == ["z", "p"]


def test_the_summary_names_a_row_only_one_run_has_and_cuts_a_long_kind_after_twelve():
    a = synthetic_report([report_row("s", f"c{index}", "max abs diff", 1e-3, 1e-4, "FAIL") for index in range(13)])
    b = synthetic_report([*_one("PASS", 1e-5)])
    lines = summary_lines(compare_reports(a, b), ("a", "b"))
    assert "rows no longer compared: 13" in lines and lines.count("  ... and 1 more") == 1
    assert sum(line.startswith("  FAIL -> -") for line in lines) == 12
    assert "rows newly compared: 1" in lines and "  - -> PASS      s: c (max abs diff)" in lines
    twelve = summary_lines(compare_reports(synthetic_report(a["rows"][:12]), b), ("a", "b"))
    assert not any("more" in line for line in twelve)


def test_a_position_point_is_the_logits_largest_error_against_the_rows_gate():
    points = position_points([[0, 4], [1, 2]], [2e-4, 2e-3], 1e-3)
    assert [(p["row"], p["position"], p["metric"], p["value"], p["status"]) for p in points] == [
        (0, 4, "max abs diff", 2e-4, "PASS"),
        (1, 2, "max abs diff", 2e-3, "FAIL"),
    ]
    assert all(p["tolerance"] == 1e-3 and p["hf"] is None and not p["higher_is_better"] for p in points)


def test_the_layer_plot_draws_sqnr_where_the_profile_measured_it():
    """A low-precision profile's layer rows carry several metrics: the plot draws the SQNR, one point
    a layer, under its name."""
    layers = [
        [Row("decoder layers", f"layer {i}", metric, value, gate, higher_is_better=metric != "max abs error")]
        for i in range(3)
        for metric, value, gate in (("cosine", 0.999, 0.995), ("SQNR dB", 30.0 + i, 20.0), ("max abs error", 0.1, 1.0))
    ]
    page = verify_page(synthetic_document() | {"figures": {"layers": layer_points(layers)}})
    plot = page.split('<section id="layers-plot">')[1].split("</section>")[0]
    assert "SQNR dB per decoder layer, relative to its gate" in plot and plot.count('class="dot"') == 3


def test_each_groups_section_is_linked_by_an_anchor_a_link_can_hold():
    """By its group, or by its stage for a row of no group (a test's row in the pytest plugin)."""
    document = synthetic_document()
    plugin_row = Row("KV cache", "K of layer 0", "max abs diff", 0.0, 1e-4).as_dict() | {"group": ""}
    page = verify_page(document | {"rows": [*document["rows"], plugin_row]})
    sections = re.findall(r'<section id="group-([^"]*)">', page)
    assert sections == ["prefill-masks", "layers", "decode", "export", "kv-cache"]
    assert all(f'href="#group-{slug}"' in page for slug in sections)


def test_a_mask_diagram_without_its_keys_line_is_titled_by_its_rows_alone():
    detail = "\n".join(line for line in mask_detail().splitlines() if "keys " not in line)
    failing = Row("masks prefill", "sliding_attention eager", "mismatched entries", 1, 0, detail, group="prefill-masks")
    page = verify_page(synthetic_document() | {"rows": [failing.as_dict()]})
    assert "<title>mask rows, keys</title>" in page


def test_a_position_at_its_tolerance_passes_as_a_row_does():
    """The per-position plot's points follow the rows' rule: an error equal to the tolerance passes."""
    at, past = position_points([[0, 3], [1, 4]], [1e-3, 1.001e-3], 1e-3)
    assert (at["status"], past["status"]) == ("PASS", "FAIL")
    assert Row("s", "c", "max abs diff", 1e-3, 1e-3).status == "PASS"
