"""Reading a ``verify --json`` report as a strict consumer would: standard JSON only (``NaN`` and
``Infinity`` refused), valid against the schema shipped in the package, and no PASS row whose gate
cannot fail."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jsonschema

from gemma4_static.oracle.results.report_json import schema


def _refuse(constant: str) -> Any:
    raise ValueError(f"non-standard JSON constant {constant}")


@functools.cache
def _validator() -> jsonschema.protocols.Validator:
    """The shipped schema, itself checked against its draft's metaschema, compiled once."""
    validator = jsonschema.validators.validator_for(schema())
    validator.check_schema(schema())
    return validator(schema(), format_checker=jsonschema.FormatChecker())


def read_report(path: Path) -> dict[str, Any]:
    """The report at ``path``, checked: strict JSON, the schema, every PASS row gated by a finite bound."""
    report = json.loads(Path(path).read_text(), parse_constant=_refuse)
    _validator().validate(report)
    ungated = [row for row in report["rows"] if row["status"] == "PASS" and row["tolerance"] is None]
    assert not ungated, f"PASS rows whose gate cannot fail: {ungated[:3]}"
    return report
