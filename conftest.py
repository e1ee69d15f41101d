"""Session fixtures: Gemma 4 models built once per session (and per xdist worker), hypothesis
profiles, the opt-in real checkpoint, and a terminal summary of builds and measured errors."""

from __future__ import annotations

import os
import sys
import types
from unittest import mock

# Offline always: set before transformers is imported anywhere in the test session.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

from collections import Counter
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, settings

# Hypothesis profiles, selectable with --hypothesis-profile=NAME.
_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large]
settings.register_profile("dev", max_examples=25, deadline=None, suppress_health_check=_SLOW_OK)
settings.register_profile(
    "ci", max_examples=60, derandomize=True, deadline=None, print_blob=True, suppress_health_check=_SLOW_OK
)
settings.register_profile("fuzz", max_examples=5000, deadline=None, print_blob=True, suppress_health_check=_SLOW_OK)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

# Under xdist every worker is its own process: one intra-op thread each keeps the workers from
# oversubscribing the cores (with the default, two workers on two cores run slower than one).
if os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(1)

pytest_plugins = ("pytester",)  # the plugin's own session, run in-process (tests/unit/test_verdict.py)

MODEL_PARAMS = ("tiny", "e2b-geometry", "checkpoint")
CHECKPOINT_ENV = "GEMMA4_CHECKPOINT"

_builds: Counter[str] = Counter()
_measurements: list[str] = []


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--gemma4-checkpoint",
        default=None,
        metavar="PATH",
        help=f"local folder of a real Gemma 4 checkpoint (default: ${CHECKPOINT_ENV}); tests on it are skipped without",
    )
    for option, (_, lane) in OPT_IN_LANES.items():
        parser.addoption(option, action="store_true", help=f"also run {lane}")


# Lanes too slow for the default run (the README's test command and CI turn them on): marker -> option.
OPT_IN_LANES = {
    "--gemma4-self-test": (
        "self_test",
        "the fault self-test: each catalogued porting bug injected, verify must catch it",
    ),
    "--gemma4-executorch": (
        "executorch",
        "the ExecuTorch lane: the text model as one program and every stage lowered with XNNPACK (each program "
        "lowered once, then read from the program cache; the a8w8 programs are the nightly lane's)",
    ),
    "--gemma4-numerics": (
        "numerics",
        "the E2B geometry's bf16, fp16 and integer profiles against HF in float64, porting bugs the "
        "low-precision gates must catch, the sensitivity sweeps",
    ),
    "--gemma4-ports": (
        "ports",
        "the ports lane: ExecuTorch's, Qualcomm's and TICO's Gemma 4 through every check, judged from a recorded "
        "reference too, a third-party adapter, the porting guide's path, new-port's test file, the plugin from the "
        "built wheel",
    ),
    "--gemma4-family": (
        "family",
        "the 31B and 26B-A4B geometries through every check group of the verify flow, about a minute",
    ),
    "--gemma4-browser": (
        "browser",
        "the pages people read: the report pages rendered in Debian's headless Chromium (apt-get install chromium) "
        "at a phone's and a monitor's width, the documentation site built strictly",
    ),
    "--gemma4-nightly": (
        "nightly",
        "what only the nightly job runs (not the README's test command): the a8w8 programs (the text model as one "
        "quantized program, every stage quantized), the one program's traced twin, the fault self-test inside a "
        "lowered program, the plugin from a wheel built and installed in a fresh venv, the E2B geometry's integer "
        "schemes (also in CI's kernel-set matrix), two of executorch-gemma4's four recipes on the default model, "
        "the long context on the 31B and 26B-A4B geometries and for the ports on the E2B geometry",
    ),
    "--gemma4-kernels": (
        "kernels",
        "the numerics lane and verify (in the dtype whose kernels the set changes) under every CPU kernel set this "
        "machine runs",
    ),
}


def pytest_configure(config: pytest.Config) -> None:
    """A run started under a kernel set (``gemma4-static kernels``) must run its kernels, or stop."""
    from gemma4_static.oracle.numerics.kernel_sets import MARKER, check_active

    if os.environ.get(MARKER):
        try:
            check_active(os.environ[MARKER])
        except ValueError as error:
            raise pytest.UsageError(str(error)) from None


def pytest_report_header(config: pytest.Config) -> str:
    from gemma4_static.oracle.numerics.kernel_sets import active_kernels

    return f"gemma4 kernels: {active_kernels()}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for option, (marker, lane) in OPT_IN_LANES.items():
        if config.getoption(option):
            continue
        skip = pytest.mark.skip(reason=f"opt-in lane, pass {option}: {lane}")
        for item in items:
            if marker in item.keywords:
                item.add_marker(skip)
    # the longest lanes first (the kernel sets' processes, then the lowering), so the two workers
    # end together instead of one finishing a long test alone
    first = ("kernels", "executorch")
    items.sort(key=lambda item: next((i for i, m in enumerate(first) if item.get_closest_marker(m)), len(first)))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A grouped test whose group was lost fails before its fixtures are built (tests/worker_groups.py)."""
    from tests.worker_groups import lost_group

    reason = lost_group(item, getattr(item.config.option, "loadgroup", False))
    if reason:
        pytest.fail(reason, pytrace=False)


def _build(name: str):
    from gemma4_static.oracle.references import models  # here: the xdist controller never imports HF

    _builds[name] += 1
    build = models.build_default_model
    return getattr(build, "unpatched", build)(name)  # the builder itself, also under reuse_session_models


@pytest.fixture(scope="session")
def tiny_model():
    """The embedded multimodal tiny model, built once per session/worker."""
    return _build("tiny")


@pytest.fixture(scope="session")
def e2b_vision_model():
    """The tiny text decoder with E2B's vision geometry, built once per session/worker."""
    return _build("e2b-vision")


@pytest.fixture(params=("tiny", "e2b-vision"))
def vision_model(request: pytest.FixtureRequest):
    """Both embedded multimodal models: the tiny vision tower and E2B's vision geometry."""
    return request.getfixturevalue({"tiny": "tiny_model", "e2b-vision": "e2b_vision_model"}[request.param])


@pytest.fixture(scope="session")
def e2b_model():
    """The E2B-geometry text model, built once per session/worker."""
    return _build("e2b-geometry")


@pytest.fixture(scope="session")
def moe_geometry_model():
    """The 26B-A4B geometry (no PLE, K = V on full layers, a MoE block per layer), built once per session/worker."""
    return _build("26b-a4b-geometry")


@pytest.fixture(scope="session")
def checkpoint_model(pytestconfig: pytest.Config):
    """A real checkpoint from local disk, or a skip that says how to provide one."""
    path = pytestconfig.getoption("--gemma4-checkpoint") or os.environ.get(CHECKPOINT_ENV)
    if not path:
        pytest.skip(f"no real Gemma 4 checkpoint: pass --gemma4-checkpoint PATH or set {CHECKPOINT_ENV}")
    if not Path(path).is_dir():
        pytest.fail(f"--gemma4-checkpoint / {CHECKPOINT_ENV} points to {path!r}, which is not a folder")
    from gemma4_static.oracle.references.checkpoints import load_checkpoint

    _builds["checkpoint"] += 1
    return load_checkpoint(path)


@pytest.fixture(params=MODEL_PARAMS)
def gemma4_model(request: pytest.FixtureRequest):
    """Every model the suite checks: the two embedded ones and the opt-in checkpoint."""
    fixture = {"tiny": "tiny_model", "e2b-geometry": "e2b_model", "checkpoint": "checkpoint_model"}[request.param]
    return request.getfixturevalue(fixture)


SESSION_MODELS = {
    "tiny": "tiny_model",
    "e2b-vision": "e2b_vision_model",
    "e2b-geometry": "e2b_model",
    "26b-a4b-geometry": "moe_geometry_model",
}


@pytest.fixture
def reuse_session_models(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """Code that builds an embedded model by name (the verify command) gets this session's instance
    instead (other names are built as usual)."""
    from gemma4_static.oracle.references import models

    build = models.build_default_model

    def session_model(name: str, **kwargs):
        return request.getfixturevalue(SESSION_MODELS[name]) if name in SESSION_MODELS else build(name, **kwargs)

    session_model.unpatched = build
    monkeypatch.setattr(models, "build_default_model", session_model)


def leaked_substitutes() -> list[str]:
    """Names in the library's modules (and on its classes) bound to a test's substitute: a mock, or a
    function or class defined in a test module. A patch undone by its test leaves none; a module
    imported *while* a name was patched keeps the substitute it imported (``from x import name``)."""
    leaked = []
    for module_name, module in list(sys.modules.items()):
        if not module_name.startswith("gemma4_static") or module is None:
            continue
        namespace = vars(module)
        owners = [(module_name, namespace)]
        owners += [
            (f"{module_name}.{name}", vars(value))
            for name, value in namespace.items()
            if isinstance(value, type) and value.__module__ == module_name
        ]
        for owner, names in owners:
            for name, value in list(names.items()):
                if isinstance(value, mock.NonCallableMock) or _from_a_test(value):
                    leaked.append(f"{owner}.{name} = {value!r}")
    return leaked


def _from_a_test(value) -> bool:
    """A function or class defined in a test module (``tests.*`` or ``conftest``)."""
    defined_in = getattr(value, "__module__", None) if isinstance(value, type | types.FunctionType) else None
    return isinstance(defined_in, str) and (defined_in.startswith("tests.") or defined_in == "conftest")


@pytest.fixture(autouse=True)
def _no_substitute_outlives_its_test():
    """Every test ends with the library as it found it: a patch that outlived its test made the default
    suite flaky once (a CLI test's mock, imported by a module loaded during the patch, later met by
    another test, depending on the order and on what hypothesis drew)."""
    yield
    leaked = leaked_substitutes()
    if leaked:
        pytest.fail(f"a test's substitute outlived it: {leaked[:3]}", pytrace=False)


@pytest.fixture(autouse=True)
def _inference_only():
    """The suite never trains: HF oracles run without autograd, like the runtime."""
    with torch.no_grad():
        yield


@pytest.fixture
def report(request: pytest.FixtureRequest):
    """``report(text)`` records a measured number for the terminal summary (and prints it)."""

    def record(text: str) -> None:
        line = f"{request.node.nodeid}: {text}"
        _measurements.append(line)
        print(line)

    return record


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: hand the numbers to the controller
        workeroutput["gemma4_builds"] = dict(_builds)
        workeroutput["gemma4_measurements"] = list(_measurements)


_worker_builds: dict[str, dict[str, int]] = {}


def pytest_testnodedown(node, error) -> None:
    output = getattr(node, "workeroutput", {})
    _worker_builds[node.workerinput["workerid"]] = output.get("gemma4_builds", {})
    _measurements.extend(output.get("gemma4_measurements", []))


def pytest_terminal_summary(terminalreporter) -> None:
    write = terminalreporter.write_line
    if _measurements:
        terminalreporter.section("gemma4 parity measurements")
        for line in sorted(_measurements):
            write(line)
    terminalreporter.section("gemma4 model builds")
    per_process = _worker_builds or {"main": dict(_builds)}
    for worker, builds in sorted(per_process.items()):
        counts = ", ".join(f"{name}={count}" for name, count in sorted(builds.items())) or "none"
        write(f"{worker}: {counts}")
