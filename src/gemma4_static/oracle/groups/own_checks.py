"""The ``own-checks`` check group: a port's own verification flow (its own idea of
parity, :meth:`~gemma4_static.ports.Gemma4Port.own_checks`) run on the sample prompt, each step
shown beside what the suite found for the same stages. Measured, never gated: the suite's rows
decide; these rows show where a port's own flow says "passed" and the suite does not (or raises)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from ...ports.capabilities.own_checks import OWN_CHECKS
from ..results.report import Row, format_row
from ..session.session import Session
from . import CheckGroup

KEYWORDS = ("|diff|", "PEIR", "argmax", "MATCH", "differ", "accuracy", "mismatch", "Mismatch", "passed", "match")
UNGATED = float("inf")


def what_it_said(printed: str, raised: str) -> str:
    """A step's verdict in its own words: the lines it printed that carry a number or a verdict."""
    lines = [line.split("] ", 1)[-1].strip() for line in printed.splitlines()]
    said = [line for line in lines if any(word in line for word in KEYWORDS)] or lines[-1:]
    text = "; ".join(said) or "nothing printed"
    return f"raised {raised}" if raised else text


def suite_found(rows: list[Row], stages: tuple[str, ...]) -> tuple[str, int]:
    """What the suite's rows say of ``stages``: the statuses counted and the first failing row, and
    how many rows failed."""
    chosen = [row for row in rows if row.stage in stages]
    if not chosen:
        return "not run in this session", 0
    counts = Counter(row.status for row in chosen)
    text = ", ".join(f"{count} {status}" for status, count in sorted(counts.items()))
    failed = [row for row in chosen if row.failed]
    if failed:
        text += f"; first failure: {format_row(failed[0]).splitlines()[0].strip()}"
    return text, len(failed)


def own_check_rows(session: Session) -> Iterator[Row]:
    """One INFO row per step of the port's own flow: what it said, and what the suite found there."""
    port = session.port
    for check in port.own_checks(session.port_prompt):
        found, failed = suite_found(session.rows, check.stages)
        said = what_it_said(check.said, check.raised)
        detail = f"{port.name}'s own flow printed:\n{check.said}" + (
            f"\nraised: {check.raised}" if check.raised else ""
        )
        yield Row(
            "own checks",
            f"{check.step}: {port.name} says: {said} | the suite ({', '.join(check.stages)}): {found}",
            "suite rows failed",
            failed,
            UNGATED,
            detail=detail,
        )


GROUP = CheckGroup(
    name="own-checks",
    order=170,
    describe="the port's own verification flow on the sample prompt, each step beside what the suite found for "
    "the same stages (measured, never gated)",
    rows=own_check_rows,
    needs=(OWN_CHECKS,),
)
