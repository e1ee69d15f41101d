"""Parity results as report rows: one measured value against its tolerance, printed or as JSON."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Row:
    """One report line: ``value`` is compared against ``tolerance`` (``value <= tolerance`` passes,
    or ``>=`` for a ``higher_is_better`` metric such as SQNR; NaN never passes). ``detail`` says more
    about a failure (e.g. a mask diagram); ``hf`` is HF's own value of the metric in the same dtype
    (against the same float64 reference), so a reader sees who is closer to the truth. A row with
    ``skipped`` set is a check the port under test cannot answer (the reason): reported as SKIP,
    it neither passes nor fails the run."""

    stage: str
    check: str
    metric: str
    value: float
    tolerance: float
    detail: str = ""
    higher_is_better: bool = False
    hf: float | None = None
    skipped: str = ""

    @property
    def passed(self) -> bool:
        """Not failed: within tolerance, or skipped."""
        if self.skipped:
            return True
        return self.value >= self.tolerance if self.higher_is_better else self.value <= self.tolerance

    @property
    def status(self) -> str:
        return "SKIP" if self.skipped else "PASS" if self.passed else "FAIL"

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "status": self.status}


def skip_row(stage: str, check: str, reason: str) -> Row:
    """A check the port under test cannot answer, with the reason (e.g. the stage it does not expose)."""
    return Row(stage, check, "not checked", math.nan, math.nan, skipped=reason)


def merge(rows: Iterable[Row], stage: str, check: str) -> Row:
    """One row for several: counts (tolerance 0) add up; errors keep the row that is worst relative
    to its own tolerance, so the merged row fails exactly when one of its rows fails. A failing
    merged row names its first failing member (rows come in data-flow order) and keeps its detail."""
    rows = list(rows)
    failed = [row for row in rows if not row.passed]
    if failed:
        check, detail = f"{check} [first: {failed[0].check}]", failed[0].detail
    else:
        detail = ""
    if all(row.tolerance == 0 and not row.higher_is_better for row in rows):
        return Row(stage, check, rows[0].metric, sum(row.value for row in rows), 0.0, detail)
    worst = max(rows, key=_badness)
    return Row(stage, check, worst.metric, worst.value, worst.tolerance, detail, worst.higher_is_better, worst.hf)


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
    failed = [row for row in rows if not row.passed]
    if failed:
        where = f"{context}: " if context else ""
        raise AssertionError(f"{where}{len(failed)} of {len(rows)} rows failed; first: {format_row(failed[0])}")


def format_row(row: Row) -> str:
    if row.skipped:
        return f"SKIP  {row.stage:<17} {row.check:<58} {row.skipped}"
    status = row.status
    bound = f"gate >= {row.tolerance:.4g}" if row.higher_is_better else f"tolerance {row.tolerance:.3g}"
    if row.hf is not None:
        bound = f"HF {row.hf:.4g}; {bound}"
    line = f"{status}  {row.stage:<17} {row.check:<58} {row.metric} = {row.value:.4g} ({bound})"
    return f"{line}\n{row.detail}" if row.detail and not row.passed else line


def write_json(rows: list[Row], path: Path, *, model: str, extra: dict[str, Any] | None = None) -> None:
    """The report as JSON: the model, whether every row passed, the rows, and ``extra`` sections."""
    report = {
        "model": model,
        "passed": all(row.passed for row in rows),
        "rows": [row.as_dict() for row in rows],
        **(extra or {}),
    }
    path.write_text(json.dumps(report, indent=2) + "\n")
