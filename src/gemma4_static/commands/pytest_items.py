"""The pytest plugin's test items: one per check group of the verify flow (:class:`PortCheck`) and one
per shard of the fuzzer (:class:`FuzzShard`), on one port and embedded model, with the verification
sessions they share (built once per process) and the judgement of a group's rows."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest

from . import plugin_report

COMPARED = "gemma4_compared"  # the user property of a test: (model, the stages it compared)
OPTIONS: dict[str, Any] = {}  # this process's plugin options the test bodies read (set by the plugin)

_sessions: dict[tuple[str, str, str, str | None, int | None], Any] = {}
_references: dict[Any, Any] = {}  # the recorded reference of --gemma4-reference, opened once per process


def recorded_reference() -> Any:
    """The reference ``--gemma4-reference`` names (opened and checked once), or ``None``."""
    folder = OPTIONS.get("--gemma4-reference")
    if folder is not None and folder not in _references:
        from ..oracle.references.reference_folder import open_reference

        _references[folder] = open_reference(folder)
    return None if folder is None else _references[folder]


def answering() -> contextlib.AbstractContextManager:
    """HF's answers from the recorded reference while a block runs (live without one)."""
    reference = recorded_reference()
    return contextlib.nullcontext() if reference is None else reference.recording.active()


def close_sessions() -> None:
    """Close every session this process built (their ports' ``close``) and forget them."""
    for built in _sessions.values():
        built.close()
    _sessions.clear()


def port_options(port: str, dtype: str, quant: str | None = None, schedules_budget: int | None = None) -> Any:
    """The run's :class:`~gemma4_static.oracle.options.VerifyOptions` for ``port`` in ``dtype`` (or
    integer scheme ``quant`` over float32), with this session's plugin options (the grid's budget,
    unless ``schedules_budget`` is given; the recorded reference)."""
    import torch

    from ..oracle.options import GRID_BUDGET, VerifyOptions

    budget = schedules_budget or OPTIONS.get("--gemma4-schedules-budget") or GRID_BUDGET
    return VerifyOptions(
        port=port, dtype=getattr(torch, dtype), quant=quant, schedules_budget=budget, reference=recorded_reference()
    )


def port_session(
    port: str, model: str, dtype: str, quant: str | None = None, schedules_budget: int | None = None
) -> Any:
    """The verification session of ``port`` on embedded ``model`` in ``dtype`` (or integer scheme
    ``quant`` over float32; the grid within ``schedules_budget`` port calls where given), built once
    per process (HF's answers from ``--gemma4-reference`` where given)."""
    key = (port, model, dtype, quant, schedules_budget)
    if key not in _sessions:
        import torch

        from ..oracle.references.models import build_default_model
        from ..oracle.session.session import open_session

        with torch.no_grad(), answering():
            options = port_options(port, dtype, quant, schedules_budget)
            _sessions[key] = open_session(build_default_model(model), options)
    return _sessions[key]


def judge(rows: list[Any], port: Any) -> None:
    """A group's outcome from its rows (statuses already set, XFAIL where the port documents a
    failure): ``AssertionError`` naming the first failing row; an expected failure when every failure
    is documented; a skip when nothing was compared (every row skipped, or measured only)."""
    from ..oracle.results.report import format_row

    failed = [row for row in rows if row.failed]
    if failed:
        raise AssertionError(f"{len(failed)} of {len(rows)} rows failed; first: {format_row(failed[0])}")
    documented = [row for row in rows if row.status == "XFAIL"]
    if documented:
        first_line = format_row(documented[0]).splitlines()[0]
        pytest.xfail(f"{port.name} documents it: {documented[0].expected} ({first_line})")
    if not any(row.compared for row in rows):
        reasons = sorted({row.skipped for row in rows if row.skipped}) or ["only measured, nothing gated"]
        pytest.skip("; ".join(reasons))


def check_group(
    port: str,
    model: str,
    dtype: str,
    group: str,
    on_rows: Callable[[list[Any]], None] | None = None,
    quant: str | None = None,
    schedules_budget: int | None = None,
) -> list[Any]:
    """Run check ``group`` (a name of :data:`~gemma4_static.oracle.groups.GROUPS`) of ``port`` on
    embedded ``model`` in ``dtype`` (or integer scheme ``quant``; the grid within ``schedules_budget``
    port calls where given), :func:`judge` its rows and return them (``on_rows`` sees them before the
    judgement): a test body, for this plugin and for a suite's own lane."""
    import torch

    from ..oracle.flow.verify import run_group

    session = port_session(port, model, dtype, quant, schedules_budget)
    with torch.no_grad(), answering():
        rows = run_group(session, group)
    if on_rows is not None:
        on_rows(rows)
    if not rows:
        from ..oracle.flow.verify import profile_kind
        from ..oracle.groups import BY_NAME

        kind = profile_kind(session.options)
        if not BY_NAME[group].runs_in(kind):
            pytest.skip(f"check group {group!r} has no rows in a {kind} profile: it runs in {BY_NAME[group].profiles}")
        pytest.skip(f"check group {group!r} has no rows on {model}: the model lacks what it checks")
    judge(rows, session.port)
    return rows


class _SpecItem(pytest.Item):
    """A test item of the plugin: its ``spec`` (what it runs), its failure as the one line it asserts."""

    def __init__(self, *, spec: tuple, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec = spec

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, AssertionError):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, self.name


class PortCheck(_SpecItem):
    """One check group of the verification flow on one port, model and profile (``spec``: port,
    model, dtype, integer scheme or ``None``, group)."""

    def runtest(self) -> None:
        port, model, dtype, quant, group = self.spec
        session = port_session(port, model, dtype, quant)
        drawn = set(session.figures)

        def record(rows: list[Any]) -> None:  # before the judgement: skipped and failed tests report too
            stages = sorted({row.stage for row in rows if row.compared})
            self.user_properties.append((COMPARED, (model, stages)))
            if OPTIONS.get("--gemma4-html") is not None:
                self.user_properties.append(plugin_report.reported(model, group, rows, session, drawn))

        check_group(port, model, dtype, group, on_rows=record, quant=quant)


class FuzzShard(_SpecItem):
    """One shard of the fuzzer on one port and model (``spec``: port, model, shard, shards): ``N /
    shards`` examples from seed ``shard``, the example database shared with the other shards; a
    divergence fails with its reproduction's path."""

    def runtest(self) -> None:
        from ..oracle.fuzz import FuzzTarget, fuzz
        from ..oracle.references.models import build_default_model

        port, model, shard, shards = self.spec
        examples = -(-OPTIONS["--gemma4-fuzz"] // shards)
        root = OPTIONS["rootdir"]
        database = root / OPTIONS["--gemma4-fuzz-database"]
        slug = "".join(c if c.isalnum() else "-" for c in port)
        folder = root / "gemma4-fuzz-reproduction" / f"{slug}-{model}-{shard}"
        result = fuzz(
            FuzzTarget.of(build_default_model(model), port_options(port, "float32")),
            max_examples=examples,
            seed=shard,
            database=database,
            reproduction=folder,
        )
        if result.examples:
            self.user_properties.append((COMPARED, (model, ["prefill logits", "decode steps"])))
        if OPTIONS.get("--gemma4-html") is not None:
            self.user_properties.append(plugin_report.fuzzed(model, shard, result))
        if result.failure is not None and result.expected is not None:
            pytest.xfail(f"documented by the port: {result.expected} ({result.failure})")
        if result.failure is not None:
            raise AssertionError(f"{result.failure}; reproduction: {result.reproduction}")
