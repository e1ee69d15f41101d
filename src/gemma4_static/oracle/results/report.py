"""Parity results as report rows: one measured value against its gate, with a status.

Statuses: ``PASS`` (a gated comparison inside its gate), ``FAIL`` (outside it, or a number that is
not one), ``XFAIL`` (a failure the port documents, :meth:`~gemma4_static.ports.Gemma4Port.explain`),
``SKIP`` (nothing compared, with the reason) and ``INFO`` (measured, not gated: an infinite gate,
e.g. ties counted, a matched prefix, a headroom). Only PASS, FAIL and XFAIL rows compared something.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, replace
from typing import Any

STATUSES = ("PASS", "FAIL", "XFAIL", "SKIP", "INFO")


@dataclass(frozen=True)
class Row:
    """One report line: ``value`` is compared against ``tolerance`` (``value <= tolerance`` passes,
    or ``>=`` for a ``higher_is_better`` metric such as SQNR; NaN never passes; an infinite gate
    makes the row INFO). ``detail`` says more about a failure (e.g. a mask diagram); ``hf`` is HF's
    own value of the metric in the same dtype (against the same float64 reference), so a reader sees
    who is closer to the truth. ``skipped`` is the reason a check compared nothing (SKIP);
    ``expected`` the port's documented reason for a failure (XFAIL); ``raised`` the traceback of an
    exception the port raised (the row then fails); ``group`` the check group it belongs to."""

    stage: str
    check: str
    metric: str
    value: float
    tolerance: float
    detail: str = ""
    higher_is_better: bool = False
    hf: float | None = None
    skipped: str = ""
    expected: str = ""
    raised: str = ""
    group: str = ""

    @property
    def gated(self) -> bool:
        """Whether the gate can fail a number (a finite tolerance; ``-inf``/``inf`` gates cannot)."""
        return math.isfinite(self.tolerance)

    @property
    def within(self) -> bool:
        """The value lies inside its gate (NaN never does)."""
        return self.value >= self.tolerance if self.higher_is_better else self.value <= self.tolerance

    @property
    def status(self) -> str:
        if self.skipped:
            return "SKIP"
        if self.gated and self.within and not self.raised:
            return "PASS"
        if not self.gated and self.value == self.value and not self.raised:  # measured, not gated
            return "INFO"
        return "XFAIL" if self.expected else "FAIL"

    @property
    def failed(self) -> bool:
        """FAIL: outside its gate (or not a number, or the port raised) and not documented by the port."""
        return self.status == "FAIL"

    @property
    def compared(self) -> bool:
        """A gated comparison took place (PASS, FAIL or XFAIL, and the port did not raise instead)."""
        return self.status in ("PASS", "FAIL", "XFAIL") and not self.raised

    def as_dict(self) -> dict[str, Any]:
        """The row as strict-JSON values: non-finite numbers become ``None`` (the status says why)."""
        fields = asdict(self)
        for name in ("value", "tolerance", "hf"):
            number = fields[name]
            fields[name] = number if number is None or math.isfinite(number) else None
        return {**fields, "status": self.status}


def counted(count: int, noun: str) -> str:
    """``count`` with ``noun``, plural unless one: ``1 row``, ``2 rows``, ``0 rows``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def skip_row(stage: str, check: str, reason: str) -> Row:
    """A check the port under test cannot answer, with the reason (e.g. the stage it does not expose)."""
    return Row(stage, check, "not checked", math.nan, math.nan, skipped=reason)


def explained(row: Row, explain: Callable[[Row], str | None]) -> Row:
    """``row`` with the port's documented reason (``explain(row)``) when it fails; else ``row``."""
    if not row.failed:
        return row
    reason = explain(row)
    return replace(row, expected=reason) if reason else row


def merge(rows: Iterable[Row], stage: str, check: str) -> Row:
    """One row for several: counts (tolerance 0) add up; errors keep the row that is worst relative
    to its own tolerance, so the merged row fails exactly when one of its rows fails. A failing
    merged row names its first failing member (rows come in data-flow order) and keeps its detail
    and traceback."""
    rows = list(rows)
    failed = [row for row in rows if row.failed]
    if failed:
        check, detail, raised = f"{check} [first: {failed[0].check}]", failed[0].detail, failed[0].raised
    else:
        detail = raised = ""
    if all(row.tolerance == 0 and not row.higher_is_better for row in rows):
        return Row(stage, check, rows[0].metric, sum(row.value for row in rows), 0.0, detail, raised=raised)
    worst = max(rows, key=_badness)
    return Row(
        stage,
        check,
        worst.metric,
        worst.value,
        worst.tolerance,
        detail,
        worst.higher_is_better,
        worst.hf,
        raised=raised,
    )


def merge_by(rows: Iterable[Row], key: Callable[[Row], str], check: str | None = None) -> Iterator[Row]:
    """Rows merged (:func:`merge`) per ``key(row)``, in first-seen order; each merged row's check is
    ``check``, or its key."""
    groups: dict[str, list[Row]] = {}
    for row in rows:
        groups.setdefault(key(row), []).append(row)
    for name, members in groups.items():
        yield merge(members, members[0].stage, name if check is None else check)


def _badness(row: Row) -> float:
    """How close to failing (larger is worse), comparable among rows of one metric."""
    if row.value != row.value:  # NaN
        return float("inf")
    if row.higher_is_better:
        return -row.value
    if row.tolerance:
        return row.value / row.tolerance
    return float("inf") if row.value > 0 else 0.0


def assert_rows_pass(rows: Iterable[Row], *, context: str = "") -> None:
    """``AssertionError`` naming the first failing row (rows come in data-flow order, so it is
    where the divergence starts) and how many failed; ``context`` says which case it was."""
    rows = list(rows)
    failed = [row for row in rows if row.failed]
    if failed:
        where = f"{context}: " if context else ""
        raise AssertionError(f"{where}{len(failed)} of {len(rows)} rows failed; first: {format_row(failed[0])}")


def format_row(row: Row, *, colour: bool = False) -> str:
    """``STATUS  stage  check  metric = value (gate)``; a failure's detail (and traceback) below it.
    ``colour`` paints FAIL red and XFAIL yellow (ANSI)."""
    status = row.status
    painted = _PAINT.get(status, "{}").format(f"{status:<5}") if colour else f"{status:<5}"
    if row.skipped:
        return f"{painted} {row.stage:<17} {row.check:<58} {row.skipped}"
    if row.gated:
        gate = f"gate >= {row.tolerance:.4g}" if row.higher_is_better else f"tolerance {row.tolerance:.3g}"
    else:
        gate = "not gated"
    if row.hf is not None:
        gate = f"HF {row.hf:.4g}; {gate}"
    line = f"{painted} {row.stage:<17} {row.check:<58} {row.metric} = {row.value:.4g} ({gate})"
    if status == "XFAIL":
        line += f"\n      documented by the port: {row.expected}"
    if status in ("FAIL", "XFAIL"):
        line += "".join(f"\n{text.rstrip()}" for text in (row.detail, row.raised) if text)
    return line


_PAINT = {"FAIL": "\033[1;31m{}\033[0m", "XFAIL": "\033[33m{}\033[0m"}
