"""The pytest plugin's report page (``--gemma4-html PATH``): each check-group test sends its rows,
the figures its group drew and what the run was (as user properties, so xdist's workers hand them to
the controller); at the session's end the controller writes one page per embedded model, as
``verify --html`` would for the same port and profile (and, when the session was interrupted, what
finished, marked incomplete)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

REPORTED = "gemma4_reported"  # the user property: (model, group, rows, figures, run facts)
FUZZED = "gemma4_fuzzed"  # the user property of a fuzz shard: (model, what it ran and found)

_reported: dict[str, dict[str, Any]] = {}  # per model: group -> (rows, figures), and the run's facts
_fuzzed: dict[str, dict[int, dict[str, Any]]] = {}  # per model: each fuzz shard's outcome


def reported(model: str, group: str, rows: list[Any], session: Any, figures_before: set[str]) -> tuple[str, Any]:
    """The user property of a test that ran ``group`` on ``model``: its rows' fields, the figures the
    group added to ``session`` and what the report names about the run."""
    from dataclasses import asdict

    figures = {name: value for name, value in session.figures.items() if name not in figures_before}
    facts = {
        "port": session.port.name,
        "version": str(session.port.version or ""),
        "profile": session.options.profile,
        "backend": session.options.backend,
        "layers": session.config.get_text_config().num_hidden_layers,
    }
    return REPORTED, (model, group, [asdict(row) for row in rows], figures, facts)


def fuzzed(model: str, shard: int, result: Any) -> tuple[str, Any]:
    """The user property of a fuzz shard: its examples and seconds, its failure, the port's reason for
    it (an expected failure) and its reproduction's path."""
    reproduction = None if result.reproduction is None else str(Path(result.reproduction).resolve())
    outcome = {"shard": shard, "examples": result.examples, "seconds": round(result.seconds, 1)}
    outcome |= {"failure": result.failure, "expected": result.expected, "reproduction": reproduction}
    return FUZZED, (model, outcome)


def collect(name: str, value: Any) -> None:
    """Keep a test's user property ``name`` (:data:`REPORTED` or :data:`FUZZED`) for the pages."""
    if name == FUZZED:
        model, outcome = value
        _fuzzed.setdefault(model, {})[outcome["shard"]] = outcome  # once, however often it is reported
        return
    model, group, rows, figures, facts = value
    entry = _reported.setdefault(model, {"groups": {}, "facts": facts})
    entry["groups"][group] = (rows, figures)


def clear() -> None:
    _reported.clear()
    _fuzzed.clear()


def write_pages(path: Path, order: list[str], interrupted: bool) -> list[Path]:
    """A page per model reported (``path`` itself for one model, else ``path``'s stem + ``-MODEL``),
    the groups in ``order`` (the verify flow's); the pages written."""
    from ..oracle.flow.verify import verdict_over
    from ..oracle.numerics.kernel_sets import active_kernels
    from ..oracle.pages.verify_page import verify_page
    from ..oracle.results.report import Row
    from ..oracle.results.report_json import report_document, run_metadata
    from ..oracle.session.sample_plan import SEEDS

    written = []
    for model, entry in sorted(_reported.items()):
        groups, facts = entry["groups"], entry["facts"]
        ran = [group for group in order if group in groups]
        rows = [Row(**fields) for group in ran for fields in groups[group][0]]
        verdict = verdict_over(rows, facts["layers"])
        figures = {name: value for group in ran for name, value in groups[group][1].items()}
        run = run_metadata(
            port=(facts["port"], facts["version"]),
            model=model,
            profile=facts["profile"],
            backend=facts["backend"],
            kernel_set=active_kernels(),
            seeds=SEEDS,
        )
        extra: dict[str, Any] = {"figures": figures}
        if model in _fuzzed:
            extra["fuzz"] = [outcome for _, outcome in sorted(_fuzzed[model].items())]
        if interrupted or len(ran) < len(order):
            extra["incomplete"] = f"{len(ran)} of {len(order)} check groups ran (the session was cut short)"
        target = path if len(_reported) == 1 else path.with_name(f"{path.stem}-{model}{path.suffix}")
        target.write_text(verify_page(report_document(verdict, run, extra)))
        written.append(target)
    return written
