"""The pytest plugin: the parity suite on any Gemma 4 port, from an installed package, no checkout.

Registered as the pytest11 entry point ``gemma4_static.pytest_plugin`` (``-p gemma4_static.pytest_plugin``
names it explicitly). With ``--gemma4-port NAME`` (a built-in port or ``package.module:factory``)
the session collects no test files: it is one test per embedded model and check group of the
verification flow (``gemma4-static verify``), against HF. A test fails on the group's first failing
row (data-flow order, so where the port first diverges), is skipped with the reasons when the port
exposes nothing the group checks, and is an expected failure with the port's own reason when every
failing row is a divergence the port documents (:meth:`~gemma4_static.ports.Gemma4Port.explain`).
Each model and its session are built once per process (per xdist worker), and their ports closed at
the end. Green must mean something was compared: each test reports the stages it compared, and the
session fails (exit code 5, one line saying what is missing) when, for a model, the minimum of
:data:`~gemma4_static.oracle.flow.verify.MINIMUM` was not compared, even with every test skipped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from . import plugin_report
from .pytest_items import COMPARED, OPTIONS, FuzzShard, PortCheck, close_sessions, recorded_reference

MODELS = ("tiny", "e2b-vision", "e2b-geometry", "e2b-multimodal")
DTYPES = ("float32", "bfloat16", "float16")


__all__ = [
    "pytest_addoption",
    "pytest_collection",
    "pytest_configure",
    "pytest_runtest_logreport",
    "pytest_sessionfinish",
    "pytest_terminal_summary",
    "pytest_unconfigure",
]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gemma4", "Gemma 4 port parity (gemma4-static)")
    group.addoption(
        "--gemma4-port",
        metavar="NAME",
        help="check this Gemma 4 port against HF: gemma4-static, executorch-gemma4, qnn-gemma4, tico-gemma4, "
        "package.module:factory",
    )
    group.addoption(
        "--gemma4-model",
        action="append",
        choices=MODELS,
        help="embedded model to check the port on (repeatable; default: tiny and e2b-geometry, or e2b-multimodal for "
        "a port that needs an image in a fixed profile)",
    )
    group.addoption("--gemma4-dtype", choices=DTYPES, default="float32", help="the profile (default float32)")
    group.addoption(
        "--gemma4-quant",
        metavar="SCHEME",
        help="an integer profile over float32 instead: a scheme the port declares (e.g. 8da4w+emb8, or a16w16t "
        "calibrated on the suite's prompts), gated per stage",
    )
    group.addoption(
        "--gemma4-schedules-budget",
        type=int,
        metavar="N",
        help="port calls the schedules grid may spend per model (default: the verify flow's)",
    )
    group.addoption(
        "--gemma4-fuzz",
        type=int,
        default=0,
        metavar="N",
        help="also fuzz the port with N examples per model (hypothesis state machine), split over the xdist workers",
    )
    group.addoption(
        "--gemma4-html",
        type=Path,
        metavar="PATH",
        help="also write the checks' report as a web page per model, as verify --html does (PATH for one model, "
        "PATH's stem + -MODEL for several; also when the session is interrupted)",
    )
    group.addoption(
        "--gemma4-reference",
        type=Path,
        metavar="DIR",
        help="judge the check groups against HF's answers recorded there (gemma4-static record) instead of running "
        "HF; the fuzzer keeps HF live",
    )
    group.addoption(
        "--gemma4-fuzz-database",
        default=".hypothesis/gemma4-fuzz",
        metavar="DIR",
        help="the fuzzer's example database, shared by the workers (default .hypothesis/gemma4-fuzz)",
    )


def pytest_collection(session: pytest.Session) -> bool | None:
    """With ``--gemma4-port``: the items are the port's check groups (no test files are collected)."""
    config = session.config
    port = config.getoption("--gemma4-port")
    if not port:
        return None
    models = _models(config)
    dtype, quant = config.getoption("--gemma4-dtype"), config.getoption("--gemma4-quant")
    profile = quant or dtype
    items: list[pytest.Item] = [
        PortCheck.from_parent(
            session, name=f"{port}[{model}-{profile}]::{group}", spec=(port, model, dtype, quant, group)
        )
        for model in models
        for group in _groups(dtype, quant)
    ]
    examples = config.getoption("--gemma4-fuzz")
    shards = _workers(config)
    items += [
        FuzzShard.from_parent(session, name=f"{port}[{model}]::fuzz-{shard}", spec=(port, model, shard, shards))
        for model in models
        for shard in range(shards if examples else 0)
    ]
    config.hook.pytest_collection_modifyitems(session=session, config=config, items=items)
    session.items = items
    session.testscollected = len(items)
    config.hook.pytest_collection_finish(session=session)
    return True


def _groups(dtype: str, quant: str | None) -> list[str]:
    """The check groups a session runs, in data-flow order: those with rows in its profile's kind."""
    from ..oracle.groups import kind_of, names

    return list(names(kind_of(dtype, quant)))


def _workers(config: pytest.Config) -> int:
    """How many processes run the session's tests (xdist's workers, else 1): the fuzzer's shards."""
    worker = getattr(config, "workerinput", None)
    if worker is not None:
        return int(worker["workercount"])
    count = getattr(config.option, "numprocesses", None)
    return count if isinstance(count, int) and count > 0 else 1


_compared: dict[str, set[str]] = {}  # per model, the stages compared (on the controller under xdist)


_outer: list[dict[str, Any]] = []  # the options of the sessions this one runs inside (pytester, in-process)


def pytest_configure(config: pytest.Config) -> None:
    _compared.clear()
    plugin_report.clear()
    _outer.append(dict(OPTIONS))
    for option in (
        "--gemma4-schedules-budget",
        "--gemma4-fuzz",
        "--gemma4-fuzz-database",
        "--gemma4-html",
        "--gemma4-reference",
    ):
        OPTIONS[option] = config.getoption(option)
    OPTIONS["rootdir"] = Path(str(config.rootpath))
    if OPTIONS["--gemma4-reference"] is not None and config.getoption("--gemma4-port"):
        try:
            recorded_reference()
        except ValueError as error:
            pytest_unconfigure(config)  # a session refused at its start leaves the options as it found them
            raise pytest.UsageError(str(error)) from None


def pytest_unconfigure(config: pytest.Config) -> None:
    """A session run inside another (pytester, in-process) leaves the outer one its options."""
    if _outer:
        outer = _outer.pop()
        OPTIONS.clear()
        OPTIONS.update(outer)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for name, value in report.user_properties:
        if name == COMPARED:
            model, stages = value
            _compared.setdefault(model, set()).update(stages)
        elif name in (plugin_report.REPORTED, plugin_report.FUZZED):
            plugin_report.collect(name, value)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Close the ports this process built; fail a ``--gemma4-port`` session whose models lack the
    minimum comparisons (exit code 5, as pytest's "no tests"), whatever else passed."""
    close_sessions()
    if not session.config.getoption("--gemma4-port") or hasattr(session.config, "workerinput"):
        return
    page = session.config.getoption("--gemma4-html")
    if page is not None:
        groups = _groups(session.config.getoption("--gemma4-dtype"), session.config.getoption("--gemma4-quant"))
        interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
        for written in plugin_report.write_pages(page, groups, interrupted):
            print(f"\ngemma4: report page written to {written}")
    lacking = _lacking(session.config)
    if lacking and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.NO_TESTS_COLLECTED


def _models(config: pytest.Config) -> list[str]:
    """The embedded models of the session: ``--gemma4-model``, else the defaults for the port's
    declared limits (a port that needs an image in a fixed profile: the E2B-multimodal model)."""
    chosen = config.getoption("--gemma4-model")
    if chosen:
        return chosen
    from ..oracle.references.models import default_models
    from ..ports.registry import declared_limits, port_factory

    return list(default_models(declared_limits(port_factory(config.getoption("--gemma4-port")))))


def _lacking(config: pytest.Config) -> dict[str, list[str]]:
    """Per model of the session, the stages of the minimum nothing compared."""
    from ..oracle.flow.verify import MINIMUM

    models = _models(config)
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
