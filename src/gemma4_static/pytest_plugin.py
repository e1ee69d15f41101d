"""The pytest plugin: the parity suite on any Gemma 4 port, from an installed package, no checkout.

Registered as the ``gemma4_static.pytest_plugin`` entry point (``-p gemma4_static.pytest_plugin``
names it explicitly). With ``--gemma4-port NAME`` (a built-in port or ``package.module:factory``)
the session collects no test files: it is one test per embedded model and check group of the
verification flow (``gemma4-static verify``), against HF. A test fails on the group's first failing
row (data-flow order, so where the port first diverges), is skipped with the reasons when the port
exposes nothing the group checks, and is an expected failure with the port's own reason when every
failing row is a divergence the port documents (:meth:`~gemma4_static.ports.base.Gemma4Port.explain`).
Each model and its session are built once per process (per xdist worker).
"""

from __future__ import annotations

from typing import Any

import pytest

MODELS = ("tiny", "e2b-vision", "e2b-geometry")
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

    models = config.getoption("--gemma4-model") or ["tiny", "e2b-geometry"]
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
    """A group's outcome from its rows: ``AssertionError`` naming the first failing row; an expected
    failure when the port explains every failing row; a skip when every row is skipped."""
    from .oracle.checks.report import format_row

    failed = [row for row in rows if not row.passed]
    if failed:
        message = f"{len(failed)} of {len(rows)} rows failed; first: {format_row(failed[0])}"
        reasons = [port.explain(row) for row in failed]
        if all(reasons):
            pytest.xfail(f"{port.name} documents it: {reasons[0]} ({message})")
        raise AssertionError(message)
    if rows and all(row.skipped for row in rows):
        pytest.skip("; ".join(sorted({row.skipped for row in rows})))


def check_group(port: str, model: str, dtype: str, group: str) -> list[Any]:
    """Run check ``group`` (a name of the verify flow's ``CHECKS``) of ``port`` on embedded ``model``
    in ``dtype``, :func:`judge` its rows and return them: a test body, for this plugin and for a
    suite's own lane."""
    import torch

    from .oracle.flow.verify import run_group

    session = port_session(port, model, dtype)
    with torch.no_grad():
        rows = run_group(session, group)
    if not rows:
        pytest.skip(f"check group {group!r} has no rows on {model}: the model lacks what it checks")
    judge(rows, session.port)
    return rows


class PortCheck(pytest.Item):
    """One check group of the verification flow on one port, model and profile."""

    def __init__(self, *, spec: tuple[str, str, str, str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec = spec

    def runtest(self) -> None:
        check_group(*self.spec)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, AssertionError):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, self.name
