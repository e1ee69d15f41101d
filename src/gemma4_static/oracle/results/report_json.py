"""The report as strict JSON, validated by a versioned JSON Schema shipped in the package
(``report.schema.json``): no ``NaN`` or ``Infinity`` (a non-finite number is ``null``, its row's
status says why), and metadata saying what ran where."""

from __future__ import annotations

import datetime
import json
import math
import platform
from importlib import metadata as package_metadata
from importlib import resources
from pathlib import Path
from typing import Any

import torch

from .verdict import Verdict

SCHEMA_VERSION = 1
LIBRARIES = ("gemma4-static", "torch", "transformers", "executorch", "torchao")


def schema() -> dict[str, Any]:
    """The report's JSON Schema (draft 2020-12)."""
    return json.loads(resources.files(__package__).joinpath("report.schema.json").read_text())


def versions() -> dict[str, str | None]:
    """Python's and each library's installed version (``None``: not installed)."""
    found: dict[str, str | None] = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            found[name] = package_metadata.version(name)
        except package_metadata.PackageNotFoundError:
            found[name] = None
    return found


def cpu() -> dict[str, Any]:
    """The CPU's name, ATen's kernel capability and the vector flags PyTorch reports."""
    capabilities = torch.cpu.get_capabilities()
    flags = sorted(name for name, value in capabilities.items() if value is True)
    return {
        "name": str(capabilities.get("cpu_name", platform.processor())),
        "aten_capability": torch.backends.cpu.get_cpu_capability(),
        "flags": flags,
    }


def run_metadata(
    *,
    port: tuple[str, str],
    model: str,
    profile: str,
    backend: str,
    kernel_set: str,
    seeds: dict[str, int],
    options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """What a report names about its run: the port (name, version), model, profile, backend, kernel
    set, library versions, CPU, the sample seeds, the date (UTC) and, where given, every option of
    the run (:meth:`~gemma4_static.oracle.options.VerifyOptions.as_dict`: its mask fill among them)."""
    return ({} if options is None else {"options": options}) | {
        "port": {"name": port[0], "version": port[1]},
        "model": model,
        "profile": profile,
        "backend": backend,
        "kernel_set": kernel_set,
        "versions": versions(),
        "cpu": cpu(),
        "seeds": dict(seeds),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def finite(value: Any) -> Any:
    """``value`` with every non-finite float (at any depth) replaced by ``None``."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [finite(item) for item in value]
    return value


def report_document(verdict: Verdict, run: dict[str, Any], extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The report: schema version, verdict (passed, exit code, counts, coverage, what the minimum
    lacks), the run's metadata, every row, and ``extra`` sections (e.g. ``sensitivity``)."""
    return finite(
        {
            "schema_version": SCHEMA_VERSION,
            "model": run["model"],
            "passed": verdict.passed,
            "exit_code": int(verdict.exit_code),
            "counts": verdict.counts,
            "coverage": verdict.coverage(),
            "missing": verdict.missing,
            "metadata": run,
            "rows": [row.as_dict() for row in verdict.rows],
            **(extra or {}),
        }
    )


def write_report(path: Path, document: dict[str, Any]) -> None:
    """``document`` as strict JSON (``allow_nan=False``: a non-finite number left in it is an error)."""
    path.write_text(json.dumps(document, indent=2, allow_nan=False) + "\n")
