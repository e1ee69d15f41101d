"""The sensitivity sweep's report on a synthetic sweep (the numerics lane runs real ones): the ranked
table (per mode, the groups in rank order under their metrics' headers) and the chart (two panels,
a bar per group, the full profile's KL dashed and named in each legend)."""

from __future__ import annotations

import re

import matplotlib

from gemma4_static.oracle.flow.sensitivity import GroupResult, Sweep
from gemma4_static.oracle.numerics.metrics import Metrics
from gemma4_static.oracle.numerics.sensitivity_report import as_json, table_lines, write_chart
from gemma4_static.oracle.pages.verify_page import verify_page
from tests.unit.oracle.pages.synthetic_reports import synthetic_document

METRICS = Metrics(max_abs=0.1, peir=1e-3, cosine=0.999, sqnr_db=30.0)


def _result(group: str, mode: str, kl: float) -> GroupResult:
    return GroupResult(group, mode, "last layer", METRICS, METRICS, 0.95, kl, 2 * kl)


SWEEP = Sweep(
    "a8w8",
    _result("every group", "all", 0.02),
    (
        _result("layer 0", "only", 0.001),
        _result("LM head", "only", 0.01),
        _result("layer 0", "all but", 0.019),
        _result("LM head", "all but", 0.008),
    ),
    calibration_seconds=1.5,
    sweep_seconds=4.0,
)


def test_the_table_ranks_each_mode_under_its_header():
    lines = table_lines(SWEEP)
    assert lines[0].startswith("sensitivity a8w8: every group quantized: logits SQNR 30.0 dB, top-1 95.0%")
    headers = [index for index, line in enumerate(lines) if line.lstrip().startswith("rank")]
    assert len(headers) == 2 and all(lines[i] == lines[headers[0]] for i in headers)
    columns = ["rank", "group", "output", "SQNR", "cosine", "PEIR", "|", "logits", "SQNR", "cosine", "PEIR", "top-1"]
    assert lines[headers[0]].split() == [*columns, "KL", "mean", "KL", "max"]
    only, all_but = lines[headers[0] + 1 : headers[0] + 3], lines[headers[1] + 1 : headers[1] + 3]
    assert [line.split()[1:3] for line in only] == [["LM", "head"], ["layer", "0"]]  # the costliest first
    assert [line.split()[1:3] for line in all_but] == [["LM", "head"], ["layer", "0"]]  # the largest saving first
    assert lines[headers[0] - 1] == "only: one group quantized, the rest float (ranked by KL)"
    assert lines[headers[1] - 1] == "all but: every group quantized but one (ranked by KL)"


def test_the_reports_section_is_what_the_page_draws():
    """``as_json`` as the report keeps it, read back by the verify page: a bar per group, named with
    its mean KL, in each mode's order (the page draws the "only" ranking)."""
    section = as_json(SWEEP)
    assert list(section) == ["scheme", "calibration_seconds", "sweep_seconds", "baseline", "ranked"]
    assert list(section["baseline"]) == [
        "group", "mode", "output", "at_output", "logits", "top1_agreement", "kl_mean", "kl_max"
    ]  # fmt: skip
    assert [(row["group"], row["mode"]) for row in section["ranked"]["all but"]] == [
        ("LM head", "all but"), ("layer 0", "all but")
    ]  # fmt: skip
    page = verify_page(synthetic_document() | {"sensitivity": section})
    chart = page.split('<section id="sensitivity">')[1].split("</section>")[0]
    assert re.findall(r"<title>([^<]*)</title>", chart)[1:] == ["LM head: 0.01", "layer 0: 0.001"]


def test_the_chart_draws_both_modes_with_the_full_profile_dashed(tmp_path):
    path = tmp_path / "sensitivity.svg"
    with matplotlib.rc_context({"svg.fonttype": "none"}):  # text kept as text, to be read back
        write_chart(SWEEP, path, title="a8w8 on tiny")
    svg = path.read_text()
    for text in ("only this group quantized", "every group but this one quantized", "a8w8 on tiny"):
        assert text in svg, text
    assert svg.count("every group quantized</text>") == 2  # each panel's legend names the dashed line
    placed = [
        (float(x), float(y), label)
        for x, y, label in re.findall(r'x="([\d.]+)" y="([\d.]+)"[^>]*>(LM head|layer 0)<', svg)
    ]
    panels = sorted({x for x, _, _ in placed})
    top_down = [[label for _, _, label in sorted((p for p in placed if p[0] == x), key=lambda p: p[1])] for x in panels]
    assert top_down == [["LM head", "layer 0"]] * 2  # in each panel the most sensitive group on top


def test_the_chart_keeps_its_colours_and_puts_each_legend_lower_right(tmp_path, monkeypatch):
    """The bars one colour, the full profile's line another, each legend in the lower right corner
    (where the shortest bars leave room): read off the figure before it is closed."""
    from matplotlib import colors, pyplot

    closed, close = [], pyplot.close
    monkeypatch.setattr(pyplot, "close", lambda figure: (closed.append(figure), close(figure)))
    write_chart(SWEEP, tmp_path / "sensitivity.png", title="a8w8 on tiny")
    (figure,) = closed
    for axis in figure.axes:
        assert {colors.to_hex(bar.get_facecolor()) for bar in axis.patches} == {"#4c72b0"}
        (line,) = axis.lines
        assert colors.to_hex(line.get_color()) == "#c44e52" and line.get_linestyle() == "--"
        assert axis.get_legend()._loc == 4  # matplotlib's code for "lower right"
