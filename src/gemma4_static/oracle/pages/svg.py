"""The report page's pictures as inline SVG (no script, no external file): the per-layer error
across the decoder stack, the schedules grid as a heat map, a bar chart, a mask diagram. Every
mark carries its numbers as a ``<title>`` (a tooltip, and what a screen reader reads); status is
never told by colour alone (a symbol in each cell, a marker per failing point)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape
from typing import Any

from .layout import number

FLOOR = 1e-4  # the plots' lowest error / gate (an exact match is drawn there)
SYMBOLS = {"pass": "", "fail": "\u2717", "raised": "!", "refused": "R", "over budget": "B"}
OUTCOME_FILL = {"fail": "#d55e00", "raised": "#7a1b0c", "refused": "#bdbdbd", "over budget": "#ececec"}
PASS_FILLS = ("#e3f2ec", "#a6d8c2", "#4fa886", "#0f6b53")  # by error / gate: a decade each, 1e-4 .. 1


def _log_position(relative: float | None, top: float) -> float:
    """``relative`` on a log axis from :data:`FLOOR` (0) to ``top`` (1)."""
    value = max(relative if relative is not None else FLOOR, FLOOR)
    return (math.log10(value) - math.log10(FLOOR)) / (math.log10(top) - math.log10(FLOOR))


def error_plot(points: Sequence[dict[str, Any]], *, x_key: str, x_label: str, title: str, series_key: str = "") -> str:
    """Each point's error relative to its gate (``relative``; log axis, 1 = the gate) against its
    ``x_key`` value: a line per ``series_key`` value (one line without it) through the points that
    have one, failing points as crosses (one without a figure, a NaN, at the top of the axis), HF's
    own (``hf_relative``) dashed where the report has it; each point's numbers in its tooltip (dots
    drawn for up to 80 points a line)."""
    if not points:
        return ""
    values = [v for point in points for v in (point.get("relative"), point.get("hf_relative")) if v is not None]
    top = 10 ** math.ceil(math.log10(max([1.0, *values])))
    width, height, left, right, above, below = 720, 260, 56, 16, 16, 40
    plot_w, plot_h = width - left - right, height - above - below
    low, high = min(point[x_key] for point in points), max(point[x_key] for point in points)

    def xy(x: float, relative: float | None) -> tuple[float, float]:
        return left + plot_w * (x - low) / max(high - low, 1), above + plot_h * (1 - _log_position(relative, top))

    title_id = f"{x_key}-plot-title"
    parts = [_open(width, height, "chart wide", title_id), f'<title id="{title_id}">{escape(title)}</title>']
    exponent = math.log10(FLOOR)
    while exponent <= math.log10(top):
        _, y = xy(low, 10**exponent)
        css, label = ("gate", "gate") if exponent == 0 else ("tick", f"1e{int(exponent)}")
        parts.append(f'<line x1="{left}" x2="{width - right}" y1="{y:.1f}" y2="{y:.1f}" class="{css}"/>')
        parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" class="axis" text-anchor="end">{label}</text>')
        exponent += 1
    lines = {}
    for point in points:
        lines.setdefault(point.get(series_key), []).append(point)  # without a key: one line, None
    for index, line in enumerate(lines.values()):
        for key, css in (("hf_relative", "hf"), ("relative", f"ours line-{index % 3}")):
            measured = [point for point in line if point.get(key) is not None]
            if measured:
                path = " ".join("{:.1f},{:.1f}".format(*xy(point[x_key], point[key])) for point in measured)
                parts.append(f'<polyline points="{path}" class="series {css}"/>')
        for point in line:
            relative = point.get("relative")
            if relative is None and point["status"] != "FAIL":
                continue  # compared nothing: no mark (a failing one without a figure, NaN, is marked at the top)
            x, y = xy(point[x_key], top if relative is None else relative)
            tip = f"{x_label} {point[x_key]}" + (f" (row {point[series_key]})" if series_key else "")
            tip += f": {point['metric']} = {number(point['value'])} (gate {number(point['tolerance'])}"
            tip += f", HF {number(point['hf'])})" if point.get("hf") is not None else ")"
            if point["status"] == "FAIL":
                path = f"M{x - 5:.1f},{y - 5:.1f}l10,10m-10,0l10,-10"
                parts.append(f'<path d="{path}" class="fail-mark"><title>{escape(tip)} FAIL</title></path>')
            elif len(line) <= 80:
                parts.append(
                    f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" class="dot"><title>{escape(tip)}</title></circle>'
                )
    step = max(1, math.ceil((high - low + 1) / 12))
    for tick in range(low, high + 1, step):
        x, _ = xy(tick, None)
        parts.append(f'<text x="{x:.1f}" y="{height - below + 16}" class="axis" text-anchor="middle">{tick}</text>')
    parts.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{height - 6}" class="axis" text-anchor="middle">{x_label}</text>'
    )
    parts.append("</svg>")
    return "".join(parts)


def _pass_fill(relative: float | None) -> str:
    return PASS_FILLS[min(int(_log_position(relative, 1.0) * len(PASS_FILLS)), len(PASS_FILLS) - 1)]


def scale_legend() -> str:
    """The heat map's colour scale in words, a swatch beside each (HTML: it wraps on a narrow screen)."""
    last = len(PASS_FILLS) - 1
    swatches = [
        (fill, f"pass, error/gate {'<= 1' if index == last else f'< 1e{index - last}'}")
        for index, fill in enumerate(PASS_FILLS)
    ]
    swatches += [(OUTCOME_FILL[name], f"{SYMBOLS[name]} {name}") for name in OUTCOME_FILL]
    return "".join(
        f'<span class="swatch"><svg width="14" height="14"><rect width="14" height="14" fill="{fill}"/></svg> '
        f"{escape(text)}</span>"
        for fill, text in swatches
    )


def heat_map(cells: Sequence[dict[str, Any]]) -> str:
    """The schedules grid: a row per prompt length, a column per schedule, each cell coloured by its
    worst error relative to the gate (darker = closer to it; failing cells orange with a cross, a port
    that raised ``!``, refused ``R``, over the budget ``B``, a schedule that gives another's chunks blank)."""
    lengths = sorted({cell["length"] for cell in cells})
    schedules = list(dict.fromkeys(cell["schedule"] for cell in cells))
    by_place = {(cell["length"], cell["schedule"]): cell for cell in cells}
    size, left, above = 30, 64, 120
    width, height = left + size * len(schedules) + 110, above + size * len(lengths) + 8
    parts = [_open(width, height, "chart grid", "grid-title")]
    parts.append('<title id="grid-title">schedules grid: prompt length by schedule, error relative to its gate</title>')
    for column, name in enumerate(schedules):
        x = left + column * size + size / 2
        parts.append(f'<text transform="translate({x:.1f},{above - 6}) rotate(-55)" class="axis">{escape(name)}</text>')
    for row, length in enumerate(lengths):
        y = above + row * size
        parts.append(f'<text x="{left - 6}" y="{y + size / 2 + 4:.1f}" class="axis" text-anchor="end">{length}</text>')
        for column, name in enumerate(schedules):
            cell = by_place.get((length, name))
            if cell is None:
                continue
            x, outcome = left + column * size, cell["outcome"]
            fill = _pass_fill(cell["relative"]) if outcome == "pass" else OUTCOME_FILL[outcome]
            tip = f"prompt {length}, {name} {cell['chunks']}: {outcome}"
            if cell["relative"] is not None:
                tip += f"; {number(cell['value'])} against gate {number(cell['tolerance'])}"
            if cell["first"]:
                tip += f"; first: {cell['first']}"
            parts.append(
                f'<g class="cell" data-outcome="{outcome}"><title>{escape(tip)}</title>'
                f'<rect x="{x + 1}" y="{y + 1}" width="{size - 2}" height="{size - 2}" fill="{fill}"/>'
                f'<text x="{x + size / 2}" y="{y + size / 2 + 5}" text-anchor="middle" class="symbol">'
                f"{SYMBOLS[outcome]}</text></g>"
            )
    parts.append("</svg>")
    return "".join(parts)


def _open(width: float, height: float, css: str, title_id: str | None = None) -> str:
    """An ``<svg>`` at its natural size (it shrinks to a narrow screen's width, never grows)."""
    labelled = f' aria-labelledby="{title_id}"' if title_id else ""
    size = f'width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}"'
    return f'<svg {size} role="img" class="{css}"{labelled}>'


def bar_chart(bars: Sequence[tuple[str, float]], label: str, reference: float | None = None) -> str:
    """Horizontal bars, largest first (``reference``: a dashed line, e.g. every group quantized)."""
    longest = max([value for _, value in bars] + [reference or 0.0, 1e-30])
    row, left, width = 22, 150, 720
    height = row * len(bars) + 36
    parts = [f"{_open(width, height, 'chart')}<title>{escape(label)}</title>"]
    for index, (name, value) in enumerate(bars):
        y, length = 8 + index * row, (width - left - 70) * value / longest
        parts.append(f'<text x="{left - 6}" y="{y + 14}" class="axis" text-anchor="end">{escape(name)}</text>')
        parts.append(
            f'<rect x="{left}" y="{y + 2}" width="{length:.1f}" height="{row - 6}" class="bar">'
            f"<title>{escape(name)}: {value:.4g}</title></rect>"
        )
        parts.append(f'<text x="{left + length + 4:.1f}" y="{y + 14}" class="axis">{value:.3g}</text>')
    if reference is not None:
        x = left + (width - left - 70) * reference / longest
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="4" y2="{height - 28}" class="gate"/>')
    parts.append(f'<text x="{left}" y="{height - 8}" class="axis">{escape(label)}</text></svg>')
    return "".join(parts)


def mask_image(rows: Sequence[tuple[int, str, str, str]], keys: str) -> str:
    """A mask diagram's query rows ``(query, ours, HF, diff)`` (``x`` allowed, ``.`` masked) as three
    grids side by side, the keys they disagree on red in the third."""
    columns, size = len(rows[0][1]), 11
    panel = columns * size + 24
    # the last panel's label ("where they differ", about 100 px at the axis' 11 px) fits a narrow mask too
    width, height = 56 + 2 * panel + max(panel, 110), 30 + size * len(rows) + 8
    parts = [f"{_open(width, height, 'chart mask')}<title>mask rows, {escape(keys)}</title>"]
    for index, name in enumerate(("ours", "HF", "where they differ")):
        parts.append(f'<text x="{56 + index * panel}" y="16" class="axis">{name}</text>')
    for line, (query, *grids) in enumerate(rows):
        y = 26 + line * size
        parts.append(f'<text x="50" y="{y + 8}" class="axis" text-anchor="end">q {query}</text>')
        for index, bits in enumerate(grids):
            for column, bit in enumerate(bits):
                x = 56 + index * panel + column * size
                css = ("differ" if bit == "x" else "same") if index == 2 else ("allowed" if bit == "x" else "masked")
                parts.append(f'<rect x="{x}" y="{y}" width="{size - 1}" height="{size - 1}" class="{css}"/>')
    parts.append("</svg>")
    return "".join(parts)
