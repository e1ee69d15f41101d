"""The verdict of a verification: what was compared, what failed, and the exit code that says so.

Green means something was compared: a run passes only when no row failed *and* the stages of the
verdict's minimum were compared (a port that exposes nothing, or only its RoPE tables, is not green;
the minimum and its groups are declared by the check groups, :data:`~..flow.verify.MINIMUM`). Exit
codes follow pytest's spirit (:class:`ExitCode`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from .report import STATUSES, Row

NAMED_STAGES = 10  # the coverage names the stages compared up to this many, else counts them


class ExitCode(IntEnum):
    """``gemma4-static verify``'s exit codes (the plugin's session ends in pytest's own)."""

    PASSED = 0  # nothing failed and the minimum was compared
    FAILED = 1  # a check failed (outside its gate)
    USAGE = 2  # bad arguments (one line on stderr)
    PORT_RAISED = 3  # the port raised (its factory or a stage), with its traceback
    INTERNAL = 4  # the suite itself raised (a bug of the checks, with the traceback)
    NOTHING_COMPARED = 5  # nothing failed, but the minimum was not compared


@dataclass(frozen=True)
class Verdict:
    """The rows of one run (each tagged with its check group), the model's layer count and how many
    layers' outputs were compared; ``minimum``: what a green verdict needs compared at least (a
    stage: the check group that compares it, counted where that group ran); ``named``: stages the
    coverage names whenever compared, under a label (``host side``: what a port builds on its host)."""

    rows: tuple[Row, ...]
    num_layers: int = 0
    layers_compared: int = 0
    minimum: Mapping[str, str] = field(default_factory=dict)
    named: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def of(cls, rows: Iterable[Row], **facts: Any) -> Verdict:
        return cls(tuple(rows), **facts)

    @property
    def counts(self) -> dict[str, int]:
        """Rows per status, every status named (zeros included)."""
        counted = Counter(row.status for row in self.rows)
        return {status: counted[status] for status in STATUSES}

    @property
    def compared_stages(self) -> list[str]:
        """The stages with at least one compared row, in data-flow order."""
        return list(dict.fromkeys(row.stage for row in self.rows if row.compared))

    @property
    def compared_groups(self) -> list[str]:
        return list(dict.fromkeys(row.group for row in self.rows if row.compared and row.group))

    @property
    def groups(self) -> list[str]:
        return list(dict.fromkeys(row.group for row in self.rows if row.group))

    @property
    def missing(self) -> list[str]:
        """The stages of :data:`MINIMUM` that nothing compared although their group ran (rows without
        a group count as every group); ``["anything"]`` when no row compared anything."""
        if not self.compared_stages:
            return ["anything"]
        ran = set(self.groups) if all(row.group for row in self.rows) else set(self.minimum.values())
        return [stage for stage, group in self.minimum.items() if group in ran and stage not in self.compared_stages]

    @property
    def exit_code(self) -> ExitCode:
        failed = [row for row in self.rows if row.failed]
        if any(row.raised for row in failed):
            return ExitCode.PORT_RAISED
        if failed:
            return ExitCode.FAILED
        return ExitCode.NOTHING_COMPARED if self.missing else ExitCode.PASSED

    @property
    def passed(self) -> bool:
        return self.exit_code == ExitCode.PASSED

    def coverage(self) -> str:
        """What the port exposed to comparison: its layers, the stages compared (named when few) and
        the check groups, e.g. ``logits only (0 of 35 layers): RoPE, prefill logits, decode steps; 4
        of 11 check groups``."""
        stages, groups = self.compared_stages, f"{len(self.compared_groups)} of {len(self.groups)} check groups"
        if not stages:
            return "nothing compared"
        named = ", ".join(stages) if len(stages) <= NAMED_STAGES else f"{len(stages)} stages"
        for label, kinds in self.named.items():
            found = [stage for stage in stages if stage in kinds]  # in data-flow order
            if found and len(stages) > NAMED_STAGES:  # counted, so named here
                named += f" ({label}: {', '.join(found)})"
        if not self.num_layers:
            return f"{named}; {groups}"
        if not self.layers_compared:
            logits = any(stage in self.minimum for stage in stages)  # "logits only" says what it did compare
            return f"{'logits only ' if logits else ''}(0 of {self.num_layers} layers): {named}; {groups}"
        return f"{self.layers_compared} of {self.num_layers} layers, {named}; {groups}"

    def summary(self) -> str:
        """One line: the counts per status, the coverage and the verdict with its exit code."""
        counts = ", ".join(f"{count} {status}" for status, count in self.counts.items())
        return f"{counts}; coverage: {self.coverage()}; {verdict_words(self.exit_code, self.missing)}"


def verdict_words(code: int, missing: list[str]) -> str:
    """The verdict as the summary line ends: ``verdict: passed (exit 0)``, ``verdict: nothing failed,
    but prefill logits not compared (exit 5)`` (``missing``: the stages of the minimum not compared)."""
    if code == ExitCode.NOTHING_COMPARED:
        outcome = f"nothing failed, but {' and '.join(missing)} not compared"
    else:
        outcome = {ExitCode.PASSED: "passed", ExitCode.FAILED: "failed", ExitCode.PORT_RAISED: "the port raised"}[code]
    return f"verdict: {outcome} (exit {int(code)})"
