"""Shards' reports joined into the whole run's (``gemma4-static merge``): the rows of every shard in
the check groups' order (the schedules grid's prompt lengths in order, its count of cases rebuilt
from every shard's cells), the figures joined, and the verdict, coverage and exit code recomputed
over all of them as if the run had been whole (:mod:`..shards`). Refused, with the reason:
reports that are not shards, shards of different runs (model, port, profile, backend, reference,
shard count), a shard missing or given twice, a row whose recorded status its values contradict."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from ..groups import EVERY_SHARD, GROUPS, SPLIT_GROUP
from ..results.report import Row
from ..results.report_json import report_document
from .verify import verdict_over

WHOLE_IN_EVERY_SHARD = EVERY_SHARD - {SPLIT_GROUP}  # each shard runs it whole, over its own groups (overflow)
SAME = ("profile", "backend", "port")  # what every shard of one run shares, beside the model and reference
_LENGTH = re.compile(r"^prompt (\d+):")


def row_of(fields: dict[str, Any]) -> Row:
    """A report row as a :class:`Row` (``None`` numbers back to what they stood for: a value that
    was not a number, a tolerance without bound); ``ValueError`` when its status does not follow."""
    values = {name: fields[name] for name in Row.__dataclass_fields__}
    values["value"] = math.nan if fields["value"] is None else fields["value"]
    values["tolerance"] = math.inf if fields["tolerance"] is None else fields["tolerance"]
    row = Row(**values)
    if row.status != fields["status"]:
        raise ValueError(f"row {row.stage}: {row.check} says {fields['status']}, its values say {row.status}")
    return row


def merge_reports(documents: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """The whole run's report from its shards' reports ``(name, document)``; ``ValueError`` naming
    what does not fit."""
    shards = [(name, document, _shard(name, document)) for name, document in documents]
    first_name, first, (_, count, num_layers) = shards[0]
    for name, document, (_, other_count, _) in shards[1:]:
        for field, mine, theirs in _identity(first, document):
            if mine != theirs:
                raise ValueError(f"{name} is a shard of another run: {field} {theirs!r}, {first_name} has {mine!r}")
        if other_count != count:
            raise ValueError(f"{name} is one of {other_count} shards, {first_name} one of {count}")
    indices = sorted(index for _, _, (index, _, _) in shards)
    if indices != list(range(1, count + 1)):
        raise ValueError(f"merge needs shards 1 to {count} once each, got {indices}")
    shards.sort(key=lambda shard: shard[2][0])
    rows = [row_of(fields) for _, document, _ in shards for fields in document["rows"]]
    cells = [cell for _, document, _ in shards for cell in document.get("figures", {}).get("grid", [])]
    merged = _in_order(rows, cells)
    figures = {"grid": sorted(cells, key=lambda cell: (cell["outcome"] in ("refused", "over budget"), cell["length"]))}
    for _, document, _ in shards:
        figures |= {name: points for name, points in document.get("figures", {}).items() if points and name != "grid"}
    extra = {"figures": figures, "merged": {"shards": [name for name, _, _ in shards]}}
    if "reference" in first:
        extra["reference"] = first["reference"]
    return report_document(verdict_over(merged, num_layers), first["metadata"], extra)


def _shard(name: str, document: dict[str, Any]) -> tuple[int, int, int]:
    shard = document.get("shard")
    if not isinstance(shard, dict):
        raise ValueError(f"{name} is not a shard's report (verify --shard I/N --json FILE writes one)")
    if document.get("incomplete"):
        raise ValueError(f"{name} is incomplete ({document['incomplete']}): run that shard again")
    return shard["index"], shard["count"], shard["num_layers"]


def _identity(first: dict[str, Any], other: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    pairs = [(field, first["metadata"][field], other["metadata"][field]) for field in SAME]
    pairs.append(("model", first["model"], other["model"]))
    answers = [document.get("reference", {}).get("answers") for document in (first, other)]
    return [*pairs, ("reference", *answers)]


def _in_order(rows: list[Row], cells: list[dict[str, Any]]) -> list[Row]:
    """``rows`` in the check groups' order; the grid's rows by prompt length, then its count rebuilt."""
    order = {group.name: index for index, group in enumerate(GROUPS)}
    ordered = sorted(rows, key=lambda row: order.get(row.group, len(order)))  # stable: a shard's own order kept
    ordered = _largest_per_site(ordered)
    grid = [row for row in ordered if row.group == SPLIT_GROUP and _LENGTH.match(row.check)]
    if not any(row.group == SPLIT_GROUP for row in ordered):
        return ordered
    grid.sort(key=lambda row: int(_LENGTH.match(row.check)[1]))
    others = [row for row in ordered if row.group == SPLIT_GROUP and not _LENGTH.match(row.check)]
    others = list({repr(row.as_dict()): row for row in others}.values())  # a row every shard wrote, once
    counted = [row for row in others if row.check.startswith("cases run")]
    if counted:
        run = sum(cell["outcome"] not in ("refused", "over budget") for cell in cells)
        refused = sum(cell["outcome"] == "refused" for cell in cells)
        dropped = sum(cell["outcome"] == "over budget" for cell in cells)
        check = f"cases run: {run} ({refused} refused by the port's limits, {dropped} over the budget)"
        others = [row for row in others if row not in counted]
        grid.append(Row(SPLIT_GROUP, check, "cases", run, math.inf, group=SPLIT_GROUP))
    at = next(index for index, row in enumerate(ordered) if row.group == SPLIT_GROUP)
    rest = [row for row in ordered if row.group != SPLIT_GROUP]
    return rest[:at] + grid + others + rest[at:]


def _largest_per_site(rows: list[Row]) -> list[Row]:
    """The groups every shard runs but the grid (overflow): per site (a decoder layer, an embedding)
    the worst row of any shard (a failing one first, else the largest value), where the first shard
    placed that site."""
    worst: dict[tuple[str, str], Row] = {}
    for row in rows:
        if row.group in WHOLE_IN_EVERY_SHARD:
            known = worst.get(_site(row))
            if known is None or _badness(row) > _badness(known):
                worst[_site(row)] = row
    merged, placed = [], set()
    for row in rows:
        if row.group not in WHOLE_IN_EVERY_SHARD:
            merged.append(row)
        elif _site(row) not in placed:
            placed.add(_site(row))
            merged.append(worst[_site(row)])
    return merged


def _site(row: Row) -> tuple[str, str]:
    site = row.check.split(",")[0]
    return row.group, " ".join(site.split()[:2]) if site.startswith("layer ") else site


def _badness(row: Row) -> tuple[bool, float]:
    return row.failed, math.inf if math.isnan(row.value) else row.value


def load_shards(paths: list[Path]) -> list[tuple[str, dict[str, Any]]]:
    """The reports at ``paths`` (``ValueError`` for a file that is not a report)."""
    from ..pages.compare import load_report

    return [(str(path), load_report(path)) for path in paths]
