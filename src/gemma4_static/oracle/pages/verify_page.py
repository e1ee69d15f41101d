"""``verify --html PATH``: the verify report (the JSON document, :mod:`..results.report_json`) as one
web page: the verdict and coverage on top, the first divergence linked, the per-layer error across
the decoder stack, the schedules grid as a heat map, the sensitivity chart where one was run, every
check group's rows (failures opened, mask diagrams drawn), and the run's provenance."""

from __future__ import annotations

import re
from html import escape
from pathlib import Path
from typing import Any

from ..results.figures import relative_to_gate
from ..results.report import STATUSES
from ..results.verdict import verdict_words
from . import svg
from .layout import badge, gate_text, number, page, provenance, table

MASK_ROW = re.compile(r"^\s+(\d+)\s+([x.]+)\s+([x.]+)\s+([x.]+)\s*$")
FIRST = "first-divergence"


def verify_page(document: dict[str, Any]) -> str:
    """The page of a verify report ``document`` (a run cut short says so on top: ``incomplete``)."""
    metadata, rows = document["metadata"], document["rows"]
    port = metadata["port"]["name"]
    title = f"gemma4-static verify: {port} on {document['model']} ({metadata['profile']})"
    first = next((index for index, row in enumerate(rows) if row["status"] == "FAIL"), None)
    parts = [f"<header><h1>{escape(title)}</h1>", _verdict(document, rows, first), "</header>"]
    parts += _pictures(document)
    groups = list(dict.fromkeys(row["group"] or row["stage"] for row in rows))
    links = "".join(f'<li><a href="#group-{escape(_slug(group))}">{escape(group)}</a></li>' for group in groups)
    parts.append(f'<nav aria-label="check groups"><h2>Check groups</h2><ul>{links}</ul></nav>')
    for group in groups:
        members = [(index, row) for index, row in enumerate(rows) if (row["group"] or row["stage"]) == group]
        parts.append(_group(group, members, first))
    parts.append(f'<section id="provenance"><h2>Provenance</h2>{provenance(metadata)}</section>')
    return page(title, "\n".join(parts))


def _judged_how(document: dict[str, Any]) -> list[str]:
    """Where HF's answers came from (a recorded reference) and what part of a run the report holds."""
    parts = []
    if document.get("reference"):
        described = escape(document["reference"]["describe"])
        parts.append(f'<p id="reference">HF\'s answers from the recorded reference {described}</p>')
    if document.get("merged"):
        shards = document["merged"]["shards"]
        parts.append(f'<p id="merged">merged from {len(shards)} shards: {escape(", ".join(shards))}</p>')
    elif document.get("shard"):
        shard = document["shard"]
        parts.append(f'<p id="shard">shard {shard["index"]} of {shard["count"]}: one part of a run</p>')
    return parts


def _verdict(document: dict[str, Any], rows: list[dict[str, Any]], first: int | None) -> str:
    state = "passed" if document["passed"] else "failed"
    text = verdict_words(document["exit_code"], document["missing"])
    parts = [f'<p class="verdict {state}" id="verdict">{escape(text)}</p>']
    if document.get("incomplete"):
        parts.append(f'<p class="incomplete" id="incomplete">incomplete: {escape(document["incomplete"])}</p>')
    parts.append(f'<p id="coverage">coverage: {escape(document["coverage"])}</p>')
    parts += _judged_how(document)
    if document.get("missing"):
        parts.append(f"<p>not compared (the minimum): {escape(', '.join(document['missing']))}</p>")
    counts = "".join(
        f'<li data-status="{status}">{badge(status)} <b>{document["counts"][status]}</b></li>' for status in STATUSES
    )
    parts.append(f'<ul class="counts" aria-label="rows by status">{counts}</ul>')
    if first is None:
        parts.append("<p>No row failed.</p>")
    else:
        row = rows[first]
        where = f"{row['stage']}: {row['check']}"
        parts.append(f'<p>First divergence: <a href="#{FIRST}">{escape(where)}</a></p>')
    return "\n".join(parts)


def _pictures(document: dict[str, Any]) -> list[str]:
    figures, parts = document.get("figures") or {}, []
    points = figures.get("layers") or []
    if points:
        metrics = list(dict.fromkeys(point["metric"] for point in points))
        metric = next((name for name in ("SQNR dB", "max abs diff") if name in metrics), metrics[0])
        drawn = [_relative(point) for point in points if point["metric"] == metric]
        title = f"{metric} per decoder layer, relative to its gate"
        plot = svg.error_plot(drawn, x_key="layer", x_label="layer", title=title)
        parts.append(
            '<section id="layers-plot"><h2>Error per decoder layer</h2>'
            f'<p class="legend">{escape(metric)} relative to its gate (log axis; the dashed red line is the gate): '
            "ours as the blue line, HF's own in the same profile dashed grey where measured; a cross marks a "
            f'failing layer.</p><div class="scroll">{plot}</div></section>'
        )
    positions = figures.get("positions") or []
    if positions:
        drawn = [_relative(point) for point in positions]
        plot = svg.error_plot(
            drawn, x_key="position", x_label="position", title="the logits' error per position", series_key="row"
        )
        parts.append(
            '<section id="positions-plot"><h2>Logits error per position</h2><p class="legend">The prefill '
            "logits' largest error at every valid position against its gate, a line per batch row (solid, "
            f'dotted, dash-dot); a cross marks a failing position.</p><div class="scroll">{plot}</div></section>'
        )
    cells = figures.get("grid") or []
    if cells:
        outcomes = {name: sum(cell["outcome"] == name for cell in cells) for name in svg.SYMBOLS}
        tally = ", ".join(f"{count} {name}" for name, count in outcomes.items() if count)
        parts.append(
            '<section id="grid"><h2>Schedules grid</h2>'
            f'<p class="legend">Prompt length (rows) by chunk schedule (columns): {escape(tally)}; each cell its '
            "worst error relative to the gate (blank: the schedule gives another schedule's chunks).</p>"
            f'<p class="legend">{svg.scale_legend()}</p>{svg.heat_map(cells)}</section>'
        )
    if document.get("fuzz"):
        parts.append(_fuzz(document["fuzz"]))
    sensitivity = document.get("sensitivity")
    if sensitivity:
        ranked = sensitivity["ranked"]["only"]
        bars = [(item["group"], item["kl_mean"]) for item in ranked]
        label = f"mean KL at the logits with only this group quantized ({sensitivity['scheme']})"
        chart = svg.bar_chart(bars, label, sensitivity["baseline"].get("kl_mean"))
        parts.append(f'<section id="sensitivity"><h2>Sensitivity</h2>{chart}</section>')
    return parts


def _fuzz(shards: list[dict[str, Any]]) -> str:
    """The fuzzer's shards: examples, seconds, the failure found and a link to its reproduction."""
    rows = []
    for shard in shards:
        status = "PASS" if shard["failure"] is None else "XFAIL" if shard["expected"] else "FAIL"
        found = escape(shard["failure"] or "no divergence")
        if shard["reproduction"]:
            link = Path(shard["reproduction"]).as_uri()
            found += (
                f' <a href="{escape(link)}">reproduction</a> (run it alone: python {escape(shard["reproduction"])})'
            )
        rows.append(
            f'<tr data-fuzz="{status}"><td>{badge(status)}</td><td>{shard["shard"]}</td>'
            f'<td class="num">{shard["examples"]}</td><td class="num">{shard["seconds"]} s</td><td>{found}</td></tr>'
        )
    columns = ["status", "shard", "examples", "seconds", "found"]
    return f'<section id="fuzz"><h2>Fuzzer</h2>{table(columns, "".join(rows))}</section>'


def _relative(point: dict[str, Any]) -> dict[str, Any]:
    higher = point["higher_is_better"]
    value, hf, tolerance = point["value"], point["hf"], point["tolerance"]
    relative = None if value is None or tolerance is None else relative_to_gate(value, tolerance, higher)
    hf_relative = None if hf is None or tolerance is None else relative_to_gate(hf, tolerance, higher)
    return {**point, "relative": relative, "hf_relative": hf_relative}


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _group(group: str, members: list[tuple[int, dict[str, Any]]], first: int | None) -> str:
    counts = {status: sum(row["status"] == status for _, row in members) for status in STATUSES}
    tally = ", ".join(f"{count} {status}" for status, count in counts.items() if count)
    body = "".join(_row(index, row, index == first) for index, row in members)
    columns = ["status", "stage", "check", "metric~", "value", "gate", "HF~"]
    return (
        f'<section id="group-{escape(_slug(group))}"><h2>{escape(group)} <small>({escape(tally)})</small></h2>'
        f"{table(columns, body)}</section>"
    )


def _row(index: int, row: dict[str, Any], first: bool) -> str:
    status = row["status"]
    anchor = FIRST if first else f"row-{index}"
    css = ' class="first"' if first else ""
    check = escape(row["check"]) + (" <b>(first divergence)</b>" if first else "")
    notes = _notes(row)
    if status == "SKIP":
        cells = f'<td class="check" colspan="5">{check}: {escape(row["skipped"])}</td>'
    else:
        cells = (
            f'<td class="check">{check}{notes}</td><td class="hide-narrow">{escape(row["metric"])}</td>'
            f'<td class="num">{number(row["value"])}</td><td class="num">{escape(gate_text(row))}</td>'
            f'<td class="num hide-narrow">{number(row.get("hf"))}</td>'
        )
    return (
        f'<tr id="{anchor}" data-status="{status}"{css}><td>{badge(status)}</td>'
        f"<td>{escape(row['stage'])}</td>{cells}</tr>"
    )


def _notes(row: dict[str, Any]) -> str:
    """A failure's detail, the port's documented reason, the traceback and a drawn mask diagram."""
    if row["status"] not in ("FAIL", "XFAIL"):
        return ""
    parts = []
    if row.get("expected"):
        parts.append(f"<p>documented by the port: {escape(row['expected'])}</p>")
    detail = row.get("detail") or ""
    masks = [match.groups() for match in map(MASK_ROW.match, detail.splitlines()) if match]
    if masks:
        keys = next((line.split("; ")[-1] for line in detail.splitlines() if "keys " in line), "keys")
        parts.append(svg.mask_image([(int(query), *grids) for query, *grids in masks], keys))
    for label, text in (("detail", detail), ("traceback", row.get("raised") or "")):
        if text:
            parts.append(f"<details open><summary>{label}</summary><pre>{escape(text)}</pre></details>")
    return "".join(parts)
