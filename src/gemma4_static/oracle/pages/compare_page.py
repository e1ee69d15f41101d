"""``gemma4-static compare A.json B.json --html PATH``: two verify reports side by side as one page
(:mod:`.compare`): the verdict of the comparison, the stages by what B lost against A, and each kind
of change with both rows' values."""

from __future__ import annotations

from html import escape
from typing import Any

from ..results.report import counted
from .compare import KINDS, Change, Comparison, error_text
from .layout import badge, gate_text, number, page, provenance, table


def compare_page(comparison: Comparison, names: tuple[str, str]) -> str:
    """The page of ``comparison`` between the reports called ``names`` (A, B)."""
    a, b = comparison.a, comparison.b
    title = f"gemma4-static compare: {names[0]} vs {names[1]}"
    state = "failed" if comparison.regressed else "passed"
    parts = [
        f"<header><h1>{escape(title)}</h1>",
        f'<p class="verdict {state}" id="verdict">{escape(comparison.verdict)} (exit {int(comparison.regressed)}; '
        f"threshold {comparison.threshold_db:g} dB)</p>",
        _runs(a, b, names),
        "</header>",
        _stages(comparison),
    ]
    for kind in KINDS[:-1]:
        changes = comparison.of_kind(kind)
        if changes:
            parts.append(_changes(kind, changes))
    parts.append(f'<section id="provenance-a"><h2>A: {escape(names[0])}</h2>{provenance(a["metadata"])}</section>')
    parts.append(f'<section id="provenance-b"><h2>B: {escape(names[1])}</h2>{provenance(b["metadata"])}</section>')
    return page(title, "\n".join(parts))


def _runs(a: dict[str, Any], b: dict[str, Any], names: tuple[str, str]) -> str:
    def line(label: str, name: str, document: dict[str, Any]) -> str:
        meta = document["metadata"]
        state = "passed" if document["passed"] else "failed"
        counts = ", ".join(f"{count} {status}" for status, count in document["counts"].items())
        what = f"{meta['port']['name']} on {document['model']} ({meta['profile']})"
        verdict = badge(state, "PASS" if document["passed"] else "FAIL")
        return f"<li><b>{label}</b> {escape(name)}: {escape(what)}; {verdict} {escape(counts)}</li>"

    return f"<ul>{line('A', names[0], a)}{line('B', names[1], b)}</ul>"


def _stages(comparison: Comparison) -> str:
    rows = []
    for loss in comparison.stage_losses():
        beyond = loss.loss_db > comparison.threshold_db
        errors = "".join(f'<td class="num">{escape(error_text(error))}</td>' for error in (loss.a_error, loss.b_error))
        rows.append(
            f'<tr data-kind="{"worse" if beyond else "within"}"><td>{escape(loss.stage)}</td>'
            f'<td class="num">{loss.loss_db:+.1f} dB</td>{errors}'
            f"<td>{badge('beyond threshold', 'worse') if beyond else ''}</td></tr>"
        )
    body = "".join(rows)
    columns = ["stage", "B lost", "A: largest error", "B: largest error", ""]
    return (
        '<section id="stages"><h2>Stages by what B lost</h2><p class="legend">Each stage\'s largest absolute '
        "error (float32 against HF, a low-precision profile against float64; documented divergences left out), "
        f"in A and in B.</p>{table(columns, body)}</section>"
    )


def _changes(kind: str, changes: list[Change]) -> str:
    body = "".join(_change(change) for change in changes)
    css = {
        "newly failing": "worse",
        "worse": "worse",
        "better": "better",
        "fixed": "better",
        "no longer compared": "gone",
    }
    css = css.get(kind, "new")
    return (
        f'<section id="kind-{kind.replace(" ", "-")}"><h2>{badge(kind, css)} {counted(len(changes), "row")}</h2>'
        f"{table(['stage', 'case', 'metric~', 'A', 'B', 'B lost'], body)}</section>"
    )


def _side(row: dict[str, Any] | None) -> str:
    if row is None:
        return "<td>absent</td>"
    value = "" if row["status"] == "SKIP" else f" {number(row.get('value'))} ({escape(gate_text(row))})"
    return f"<td>{badge(row['status'])}{value}</td>"


def _change(change: Change) -> str:
    loss = "" if change.loss_db is None else f"{change.loss_db:+.1f} dB"
    return (
        f'<tr data-kind="{escape(change.kind)}"><td>{escape(change.stage)}</td>'
        f'<td class="check">{escape(change.case)}</td><td class="hide-narrow">{escape(change.metric)}</td>'
        f'{_side(change.a)}{_side(change.b)}<td class="num">{loss}</td></tr>'
    )
