"""The report pages in a real browser: Debian's headless Chromium driven by Playwright (no browser
download: ``apt-get install chromium``). Pages of real runs (this runtime in float32 and bf16, a run
with a catalogued porting bug injected, the float32 and bf16 runs compared) at a phone's width and a
monitor's: the rows per status equal the JSON's, the verdict reads as the JSON says, the first
divergence's link lands on its row, nothing reaches past the file, no console error, nothing wider
than the screen; a screenshot of each (in ``$GEMMA4_SCREENSHOTS`` when set)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gemma4_static.oracle.pages.compare import compare_reports
from gemma4_static.oracle.pages.compare_page import compare_page
from gemma4_static.oracle.pages.verify_page import verify_page
from gemma4_static.oracle.results.verdict import verdict_words

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]  # one worker: one browser

WIDTHS = {"phone": 390, "monitor": 1280}
RUNS = ("float32", "bfloat16", "fault")


def _open(browser, path: Path, width: int):
    """The page at ``path`` in a new context ``width`` wide, every request but the file's refused and
    recorded, console errors and page errors recorded."""
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    leaving, errors = [], []
    url = path.resolve().as_uri()
    page.route("**/*", lambda route: route.continue_() if route.request.url == url else (
        leaving.append(route.request.url), route.abort()))  # fmt: skip
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(url)
    return context, page, leaving, errors


def _check_layout(page, leaving: list[str], errors: list[str], width: int) -> None:
    assert leaving == [] and errors == []
    overflow = page.evaluate("document.documentElement.scrollWidth")
    assert overflow <= width, f"the page is {overflow} px wide on a {width} px screen"


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("run", RUNS)
def test_the_verify_page_in_chromium(browser, documents, folder, run, width, report):
    document = documents[run]
    path = folder / f"verify-{run}.html"
    path.write_text(verify_page(document))
    shot = _check_verify_page(browser, document, path, WIDTHS[width], folder / f"verify-{run}-{width}.png")
    report(f"{run} at {WIDTHS[width]} px: {sum(document['counts'].values())} rows, {path.stat().st_size} bytes, {shot}")


NAMED = os.environ.get("GEMMA4_REPORTS", "").split()  # reports (JSON, the page beside as .html) of other runs


@pytest.mark.skipif(not NAMED, reason="no report named: set GEMMA4_REPORTS to JSON reports with their .html beside")
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("named", NAMED)
def test_the_page_of_a_named_report_in_chromium(browser, folder, named, width, report):
    """The page ``verify --json R.json --html R.html`` wrote for a run of any port and model (CI: the
    E2B geometry's runs), checked against its JSON as the lane's own pages are."""
    document = json.loads(Path(named).read_text())
    path = Path(named).with_suffix(".html")
    _check_verify_page(browser, document, path, WIDTHS[width], folder / f"{path.stem}-{width}.png")
    report(f"{named} at {WIDTHS[width]} px: {sum(document['counts'].values())} rows, {path.stat().st_size} bytes")


def _check_verify_page(browser, document: dict, path: Path, width: int, shot: Path) -> Path:
    """The page at ``path`` against its ``document``, ``width`` wide; its screenshot at ``shot``."""
    context, page, leaving, errors = _open(browser, path, width)
    try:
        for status, count in document["counts"].items():
            assert page.locator(f"tr[data-status={status}]").count() == count, status
        assert page.locator("#verdict").inner_text() == verdict_words(document["exit_code"], document["missing"])
        failing = document["counts"]["FAIL"]
        assert page.locator("#first-divergence").count() == (1 if failing else 0)
        if failing:
            page.locator('a[href="#first-divergence"]').click()
            assert page.evaluate("location.hash") == "#first-divergence"
            assert page.locator("#first-divergence").is_visible()
        if any(row["status"] == "FAIL" and row["stage"].startswith("masks") for row in document["rows"]):
            assert page.locator("tr[data-status=FAIL] svg.mask").count() > 0  # the failing masks, drawn
        figures = document.get("figures", {})
        assert page.locator("#layers-plot svg").count() == (1 if figures.get("layers") else 0)
        assert page.locator("#grid g.cell").count() == len(figures.get("grid", []))
        _check_layout(page, leaving, errors, width)
        page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 10_000
    finally:
        context.close()
    return shot


@pytest.mark.parametrize("width", WIDTHS)
def test_the_compare_page_in_chromium(browser, documents, folder, width, report):
    comparison = compare_reports(documents["float32"], documents["bfloat16"])
    path = folder / "compare-float32-bfloat16.html"
    path.write_text(compare_page(comparison, ("float32.json", "bfloat16.json")))
    context, page, leaving, errors = _open(browser, path, WIDTHS[width])
    try:
        for kind in {change.kind for change in comparison.changes} - {"same"}:
            expected = sum(change.kind == kind for change in comparison.changes)
            assert page.locator(f'tr[data-kind="{kind}"]').count() == expected, kind
        assert page.locator("#stages tbody tr").count() == len(comparison.stage_losses())
        assert (
            page.locator("#verdict").inner_text().startswith("regressed" if comparison.regressed else "no regression")
        )
        _check_layout(page, leaving, errors, WIDTHS[width])
        page.screenshot(path=str(folder / f"compare-{width}.png"), full_page=True)
    finally:
        context.close()
    report(f"compare float32 vs bfloat16 at {WIDTHS[width]} px: {len(comparison.stage_losses())} stages")


def test_a_request_leaving_the_file_is_seen(browser, tmp_path):
    """The lane's own net: a page that loads an image from elsewhere is caught (and the load refused)."""
    path = tmp_path / "leaky.html"
    path.write_text('<!doctype html><title>t</title><img src="https://example.invalid/x.png" alt="x">')
    context, page, leaving, _ = _open(browser, path, 390)
    try:
        page.wait_for_load_state("load")
        assert leaving == ["https://example.invalid/x.png"]
    finally:
        context.close()
