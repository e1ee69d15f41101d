"""The pytest plugin: the parity suite on any Gemma 4 port, from an installed package, no checkout.

Registered as the ``gemma4_static.pytest_plugin`` entry point (``-p gemma4_static.pytest_plugin``
names it explicitly). With ``--gemma4-port NAME`` (a built-in port or ``package.module:factory``)
the session collects no test files: it is one test per embedded model and check group of the
verification flow (``gemma4-static verify``), against HF. A test fails on the group's first failing
row (data-flow order, so where the port first diverges), is skipped with the reasons when the port
exposes nothing the group checks, and is an expected failure with the port's own reason when every
failing row is a divergence the port documents (:meth:`~gemma4_static.ports.base.Gemma4Port.explain`).
Each model and its session are built once per process (per xdist worker), and their ports closed at
the end. Green must mean something was compared: each test reports the stages it compared, and the
session fails (exit code 5, one line saying what is missing) when, for a model, the minimum of
:data:`~gemma4_static.oracle.checks.verdict.MINIMUM` was not compared, even with every test skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

MODELS = ("tiny", "e2b-vision", "e2b-geometry")
DEFAULT_MODELS = ("tiny", "e2b-geometry")
DTYPES = ("float32", "bfloat16", "float16")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gemma4", "Gemma 4 port parity (gemma4-static)")
    group.addoption(
        "--gemma4-port",
        metavar="NAME",
        help="check this Gemma 4 port against HF: gemma4-static, executorch-gemma4, qnn-gemma4, package.module:factory",
    )
    group.addoption(
        "--gemma4-model",
        action="append",
        choices=MODELS,
        help="embedded model to check the port on (repeatable; default: tiny and e2b-geometry)",
    )
    group.addoption("--gemma4-dtype", choices=DTYPES, default="float32", help="the profile (default float32)")


def pytest_collection(session: pytest.Session) -> bool | None:
    """With ``--gemma4-port``: the items are the port's check groups (no test files are collected)."""
    config = session.config
    port = config.getoption("--gemma4-port")
    if not port:
        return None
    from .oracle.flow.verify import CHECKS

    models = config.getoption("--gemma4-model") or list(DEFAULT_MODELS)
    dtype = config.getoption("--gemma4-dtype")
    items = [
        PortCheck.from_parent(session, name=f"{port}[{model}-{dtype}]::{group}", spec=(port, model, dtype, group))
        for model in models
        for group in CHECKS
    ]
    config.hook.pytest_collection_modifyitems(session=session, config=config, items=items)
    session.items = items
    session.testscollected = len(items)
    config.hook.pytest_collection_finish(session=session)
    return True


_sessions: dict[tuple[str, str, str], Any] = {}


def port_session(port: str, model: str, dtype: str) -> Any:
    """The verification session of ``port`` on embedded ``model`` in ``dtype``, built once per process."""
    key = (port, model, dtype)
    if key not in _sessions:
        import torch

        from .oracle.flow.session import open_session
        from .oracle.references.models import build_default_model

        with torch.no_grad():
            _sessions[key] = open_session(build_default_model(model), dtype=getattr(torch, dtype), port=port)
    return _sessions[key]


def judge(rows: list[Any], port: Any) -> None:
    """A group's outcome from its rows (statuses already set, XFAIL where the port documents a
    failure): ``AssertionError`` naming the first failing row; an expected failure when every failure
    is documented; a skip when nothing was compared (every row skipped, or measured only)."""
    from .oracle.checks.report import format_row

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
    port: str, model: str, dtype: str, group: str, on_rows: Callable[[list[Any]], None] | None = None
) -> list[Any]:
    """Run check ``group`` (a name of the verify flow's ``CHECKS``) of ``port`` on embedded ``model``
    in ``dtype``, :func:`judge` its rows and return them (``on_rows`` sees them before the judgement):
    a test body, for this plugin and for a suite's own lane."""
    import torch

    from .oracle.flow.verify import run_group

    session = port_session(port, model, dtype)
    with torch.no_grad():
        rows = run_group(session, group)
    if on_rows is not None:
        on_rows(rows)
    if not rows:
        pytest.skip(f"check group {group!r} has no rows on {model}: the model lacks what it checks")
    judge(rows, session.port)
    return rows


COMPARED = "gemma4_compared"  # the user property of a test: (model, the stages it compared)


class PortCheck(pytest.Item):
    """One check group of the verification flow on one port, model and profile."""

    def __init__(self, *, spec: tuple[str, str, str, str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec = spec

    def runtest(self) -> None:
        port, model, dtype, group = self.spec

        def record(rows: list[Any]) -> None:  # before the judgement: skipped and failed tests report too
            stages = sorted({row.stage for row in rows if row.compared})
            self.user_properties.append((COMPARED, (model, stages)))

        check_group(port, model, dtype, group, on_rows=record)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, AssertionError):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, self.name


_compared: dict[str, set[str]] = {}  # per model, the stages compared (on the controller under xdist)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for name, value in report.user_properties:
        if name == COMPARED:
            model, stages = value
            _compared.setdefault(model, set()).update(stages)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Close the ports this process built; fail a ``--gemma4-port`` session whose models lack the
    minimum comparisons (exit code 5, as pytest's "no tests"), whatever else passed."""
    for built in _sessions.values():
        built.close()
    _sessions.clear()
    if not session.config.getoption("--gemma4-port") or hasattr(session.config, "workerinput"):
        return
    lacking = _lacking(session.config)
    if lacking and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.NO_TESTS_COLLECTED


def _lacking(config: pytest.Config) -> dict[str, list[str]]:
    """Per model of the session, the stages of the minimum nothing compared."""
    from .oracle.checks.verdict import MINIMUM

    models = config.getoption("--gemma4-model") or list(DEFAULT_MODELS)
    lacking = {model: [stage for stage in MINIMUM if stage not in _compared.get(model, set())] for model in models}
    return {model: missing for model, missing in lacking.items() if missing}


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if not config.getoption("--gemma4-port") or hasattr(config, "workerinput"):
        return
    port = config.getoption("--gemma4-port")
    for model, missing in _lacking(config).items():
        terminalreporter.write_line(
            f"gemma4: nothing compared for port {port} on {model}: {' and '.join(missing)} not compared "
            "(a port that exposes nothing is not green)",
            red=True,
        )
