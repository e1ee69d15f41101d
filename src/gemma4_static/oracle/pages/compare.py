"""Two verify reports side by side (``gemma4-static compare A.json B.json``): two ports on one model,
or one port before (A) and after (B) a change. Rows are matched by stage, case and metric (the
case's text without what names its first failure, and without counts that differ between runs of
the same check); each matched pair is judged by how much B lost against A, in dB of its error
relative to its gate (so an error that doubled lost 6 dB, an SQNR that fell 3 dB lost 3 dB). Each
stage is also judged whole, by its largest absolute error in either profile (two profiles' rows
rarely share a case). A regression: a row failing in B that did not fail in A, a row or a stage
that lost more than the threshold."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..results.report import counted

FLOOR = 1e-6  # the smallest error relative to its gate told apart (an exact match counts as this)
KINDS = ("newly failing", "worse", "better", "fixed", "newly compared", "no longer compared", "same")
COMPARED = ("PASS", "FAIL", "XFAIL")
ABSOLUTE = ("max abs diff", "max abs error")  # a stage's error in any profile (vs HF, vs float64)
UNGATED_ERRORS = ("max abs", "PEIR")  # INFO rows whose value is an error all the same
_FIRST = re.compile(r"\s*\[(?:first|worst|widest): .*$")


@dataclass(frozen=True)
class Change:
    """One row of A and its match in B (either may be ``None``: a row only one run has), what
    happened to it (:data:`KINDS`), and how many dB B lost against A (``None``: not comparable)."""

    stage: str
    case: str
    metric: str
    a: dict[str, Any] | None
    b: dict[str, Any] | None
    kind: str
    loss_db: float | None


@dataclass(frozen=True)
class Comparison:
    """Every change, the threshold the gate used, and the two reports' names and verdicts."""

    changes: list[Change]
    threshold_db: float
    a: dict[str, Any]
    b: dict[str, Any]

    @property
    def regressions(self) -> list[Change]:
        """Rows failing in B that did not fail in A, and rows that lost more than the threshold."""
        return [
            change
            for change in self.changes
            if change.kind == "newly failing"
            or (change.kind == "worse" and change.loss_db is not None and change.loss_db > self.threshold_db)
        ]

    @property
    def regressed_stages(self) -> list[StageLoss]:
        """Stages whose largest absolute error grew by more than the threshold."""
        return [stage for stage in self.stage_losses() if stage.loss_db > self.threshold_db]

    @property
    def regressed(self) -> bool:
        return bool(self.regressions or self.regressed_stages)

    @property
    def verdict(self) -> str:
        """The verdict's words, as the terminal's last line and the page's banner say them."""
        if not self.regressed:
            return "no regression"
        return f"regressed: {counted(len(self.regressions), 'row')}, {counted(len(self.regressed_stages), 'stage')}"

    def of_kind(self, kind: str) -> list[Change]:
        """The changes of ``kind``, the largest loss (or gain) first."""
        chosen = [change for change in self.changes if change.kind == kind]
        return sorted(chosen, key=lambda change: -abs(change.loss_db or 0.0))

    def stage_losses(self) -> list[StageLoss]:
        """Per stage both runs measured, the largest absolute error of each (:data:`ABSOLUTE` metrics,
        whatever the case and profile: float32 against HF, a low-precision profile against float64; a
        divergence the port documents, XFAIL, left out) and how many dB B lost; the largest loss first."""
        errors_a, errors_b = _largest_errors(self.a["rows"]), _largest_errors(self.b["rows"])
        losses = [
            StageLoss(stage, errors_a[stage], errors_b[stage], 20 * math.log10(errors_b[stage] / errors_a[stage]))
            for stage in errors_a
            if stage in errors_b
        ]
        return sorted(losses, key=lambda loss: -loss.loss_db)


@dataclass(frozen=True)
class StageLoss:
    """A stage's largest absolute error in A and in B (at least :data:`FLOOR`) and B's loss in dB."""

    stage: str
    a_error: float
    b_error: float
    loss_db: float


def error_text(value: float) -> str:
    """A stage's largest error as printed: at :data:`FLOOR` it reads ``<= 1e-06`` (an exact match too)."""
    return f"<= {FLOOR:g}" if value <= FLOOR else f"{value:.4g}"


def _largest_errors(rows: list[dict[str, Any]]) -> dict[str, float]:
    largest: dict[str, float] = {}
    for row in rows:
        if row["metric"] in ABSOLUTE and row["status"] in ("PASS", "FAIL", "INFO") and row.get("value") is not None:
            largest[row["stage"]] = max(largest.get(row["stage"], FLOOR), row["value"])
    return largest


def load_report(path: Path) -> dict[str, Any]:
    """A verify report from ``path``; ``ValueError`` naming the file when it is not one."""
    try:
        document = json.loads(Path(path).read_text())
    except (OSError, ValueError) as error:
        raise ValueError(f"report {str(path)!r} cannot be read as JSON: {error}") from None
    if (
        not isinstance(document, dict)
        or document.get("schema_version") != 1
        or not isinstance(document.get("rows"), list)
    ):
        raise ValueError(f"report {str(path)!r} is not a verify report (schema version 1 with rows); see verify --json")
    return document


def case_of(row: dict[str, Any]) -> str:
    """A row's case as both runs name it: without its first failure, its profile's suffix and its counts
    of schedules or cases (which a port's limits change)."""
    case = row["check"].replace(", vs float64", "")
    case = _FIRST.sub("", case)
    case = re.sub(r"\b\d+ schedules\b", "schedules", case)
    return re.sub(r"^cases run: .*", "cases run", case)


def severity(row: dict[str, Any]) -> float | None:
    """The row's error relative to its gate (at least :data:`FLOOR`; an SQNR or other dB figure as the
    error amplitude it stands for, a cosine by its distance from 1); an ungated error (a max abs error,
    a PEIR) as itself; ``None`` for a row that compared nothing or a figure that is not an error."""
    value, tolerance = row.get("value"), row.get("tolerance")
    if row["status"] == "SKIP" or value is None:
        return None
    if row.get("higher_is_better"):
        if tolerance is None:
            return None
        if "dB" in row["metric"]:
            return max(10 ** ((tolerance - value) / 20), FLOOR)
        return max((1 - value) / max(1 - tolerance, FLOOR), FLOOR)
    if tolerance is None and not any(word in row["metric"] for word in UNGATED_ERRORS):
        return None  # a count that is not an error (matched prefix, ties, cases)
    if tolerance:
        return max(value / tolerance, FLOOR)
    return max(value, FLOOR)


def compare_reports(a: dict[str, Any], b: dict[str, Any], threshold_db: float = 6.0) -> Comparison:
    """Every row of ``a`` and ``b`` matched by (stage, case, metric) and judged; ``threshold_db``: the
    loss beyond which a row that still passes is a regression."""
    if not (math.isfinite(threshold_db) and threshold_db >= 0):
        raise ValueError(f"threshold_db must be a finite number >= 0 (dB), got {threshold_db!r}")
    keyed_a, keyed_b = _keyed(a["rows"]), _keyed(b["rows"])
    changes = [_change(key, keyed_a.get(key), keyed_b.get(key)) for key in dict.fromkeys([*keyed_a, *keyed_b])]
    return Comparison(changes, threshold_db, a, b)


def _keyed(rows: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    keyed: dict[tuple[str, str, str], dict[str, Any]] = {}
    for row in rows:
        keyed.setdefault((row["stage"], case_of(row), row["metric"]), row)
    return keyed


def _change(key: tuple[str, str, str], a: dict[str, Any] | None, b: dict[str, Any] | None) -> Change:
    compared_a = a is not None and a["status"] in COMPARED
    compared_b = b is not None and b["status"] in COMPARED
    failed_a, failed_b = a is not None and a["status"] == "FAIL", b is not None and b["status"] == "FAIL"
    loss = None
    if a is not None and b is not None:
        before, after = severity(a), severity(b)
        loss = None if before is None or after is None else 20 * math.log10(after / before)
    if failed_b and not failed_a:
        kind = "newly failing"
    elif failed_a and not failed_b and compared_b:
        kind = "fixed"
    elif compared_b and not compared_a:
        kind = "newly compared"
    elif compared_a and not compared_b:
        kind = "no longer compared"
    elif loss is not None and abs(loss) >= 0.5:  # half a dB: what a reader would call a change
        kind = "worse" if loss > 0 else "better"
    else:
        kind = "same"
    return Change(*key, a, b, kind, loss)


def summary_lines(comparison: Comparison, names: tuple[str, str]) -> list[str]:
    """The comparison as the terminal prints it: the stages by loss, then each kind of change."""
    lines = [f"compare: A = {names[0]}, B = {names[1]}; threshold {comparison.threshold_db:g} dB"]
    lines.append("stages by the most B lost against A (largest absolute error, A -> B):")
    lines += [
        f"  {loss.loss_db:+8.1f} dB  {loss.stage} ({error_text(loss.a_error)} -> {error_text(loss.b_error)})"
        for loss in comparison.stage_losses()
    ]
    for kind in KINDS[:-1]:
        changes = comparison.of_kind(kind)
        if changes:
            lines.append(f"rows {kind}: {len(changes)}")
            lines += [f"  {_line(change)}" for change in changes[:12]]
            lines += [f"  ... and {len(changes) - 12} more"] if len(changes) > 12 else []
    return [*lines, f"compare: {comparison.verdict} (exit {int(comparison.regressed)})"]


def _line(change: Change) -> str:
    loss = "" if change.loss_db is None else f"{change.loss_db:+.1f} dB "
    statuses = f"{(change.a or {}).get('status', '-')} -> {(change.b or {}).get('status', '-')}"
    return f"{loss}{statuses:<14} {change.stage}: {change.case} ({change.metric})"
