"""``verify --quant SCHEME --sensitivity``: the sweep printed as a ranked table and drawn as a chart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..oracle.flow.sensitivity import run_sensitivity
from ..oracle.numerics.sensitivity_report import as_json, table_lines, write_chart
from ..oracle.options import VerifyOptions


def chart_path(json_path: Path | None, name: str, scheme: str) -> Path:
    """Beside the JSON report (``report.json`` -> ``report.sensitivity.png``), else in the working folder."""
    if json_path is not None:
        return json_path.with_suffix(".sensitivity.png")
    safe = "".join(char if char.isalnum() or char in "-_" else "-" for char in f"{Path(name).name}-{scheme}")
    return Path(f"sensitivity-{safe}.png")


def sensitivity_section(model: Any, name: str, options: VerifyOptions, json_path: Path | None) -> dict:
    """Run the sweep of ``options.quant`` (of ``options.port``: this runtime, or another port's own
    switches), print its table, write its chart; the JSON report's ``sensitivity`` section."""
    scheme = options.quant
    sweep = run_sensitivity(model, options)
    print("\n".join(table_lines(sweep)), flush=True)
    path = chart_path(json_path, name, scheme)
    write_chart(sweep, path, title=f"{name}, {scheme}: which group costs the most (KL at the logits)")
    print(f"sensitivity: chart written to {path}")
    return {"sensitivity": {**as_json(sweep), "chart": str(path)}}
