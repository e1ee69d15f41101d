"""The suite's own house rules, loaded as a plugin by the root ``conftest.py``: hypothesis profiles,
one intra-op thread per xdist worker, the kernel set a run was started under, no test's substitute
outliving it, inference only, the cyclic garbage collector kept off what collecting imported, and
the terminal summary of the models built and the numbers measured."""

from __future__ import annotations

import gc
import operator
import os
import sys
import types
from collections import Counter
from collections.abc import Mapping
from unittest import mock

import pytest
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
# The xdist controller runs no test: it imports no torch (about 1 s before the workers start).
if os.environ.get("PYTEST_XDIST_WORKER"):
    gc.disable()  # while collecting: see pytest_collection_finish
    import torch

    torch.set_num_threads(1)

BUILDS: Counter[str] = Counter()  # models built in this process (tests/conftest.py counts them)
MEASUREMENTS: list[str] = []  # numbers a test reported (the ``report`` fixture)
_worker_builds: dict[str, dict[str, int]] = {}
_worker_kernels: dict[str, str] = {}


def pytest_configure(config: pytest.Config) -> None:
    """A run started under a kernel set (``gemma4-static kernels``) must run its kernels, or stop."""
    from gemma4_static.oracle.numerics.kernel_sets import MARKER, check_active

    if os.environ.get(MARKER):
        try:
            check_active(os.environ[MARKER])
        except ValueError as error:
            raise pytest.UsageError(str(error)) from None


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collecting imported (torch, transformers, every test module: most of a worker's objects,
    none of them garbage) frozen out of the cyclic collector's passes, and the youngest generation
    collected every 20,000 allocations instead of 700: the collector's full passes walked them all
    again and again, 3.5 s of each worker's run of the default suite (1.9 s now). An xdist worker
    collects with the collector off (turned on here): its passes while torch, transformers and the
    test modules were imported took 1 s of each worker's 4.8 s of collecting. Tensors are freed by
    reference counting as before; only garbage in cycles waits a little longer."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 10, 10)
    gc.enable()


def _runs_tests(config: pytest.Config) -> bool:
    """An xdist worker, or a run without workers (not the controller, which runs no test)."""
    return bool(os.environ.get("PYTEST_XDIST_WORKER")) or not getattr(config.option, "numprocesses", None)


def _kernels() -> str:
    from gemma4_static.oracle.numerics.kernel_sets import active_kernels

    return active_kernels()


def pytest_report_header(config: pytest.Config) -> str | None:
    """The kernels of a run without workers; each worker's are in the terminal summary."""
    return f"gemma4 kernels: {_kernels()}" if _runs_tests(config) else None


_found_clean: dict[str, tuple] = {}  # each owner's values as last found clean, in its names' order
_classes_of: dict[str, list[tuple[str, type]]] = {}  # each module's classes when it was last found clean
_library_modules: tuple[int, list[tuple[str, types.ModuleType]]] = (0, [])  # sys.modules' size, the modules


def leaked_substitutes() -> list[str]:
    """Names in the library's modules (and on its classes) bound to a test's substitute: a mock, or a
    function or class defined in a test module. A patch undone by its test leaves none; a module
    imported *while* a name was patched keeps the substitute it imported (``from x import name``).
    An owner whose names are all still bound to the values it was found clean with is not looked at
    again (run after every test, the scan would otherwise cost a few seconds of each worker's run);
    a module's classes are looked for again whenever the module is."""
    leaked = []
    for module_name, module in _modules():
        namespace = vars(module)
        classes = _classes_of.get(module_name, [])
        if not _unchanged(module_name, namespace):
            found = _scanned(module_name, namespace)
            classes = [
                (name, value)
                for name, value in namespace.items()
                if isinstance(value, type) and value.__module__ == module_name
            ]
            if found:
                leaked += found
            else:  # kept with the names found clean: the same namespace has the same classes
                _classes_of[module_name] = classes
        for name, cls in classes:
            owner = f"{module_name}.{name}"
            if not _unchanged(owner, vars(cls)):
                leaked += _scanned(owner, vars(cls))
    return leaked


def _modules() -> list[tuple[str, types.ModuleType]]:
    """The library's modules (looked for again when sys.modules changes size or holds another object
    under a name found before: a module imported afresh)."""
    global _library_modules
    size, modules = _library_modules
    if size != len(sys.modules) or not all(sys.modules.get(name) is module for name, module in modules):
        found = [(name, module) for name, module in list(sys.modules.items()) if name.startswith("gemma4_static")]
        _library_modules = (len(sys.modules), [(name, module) for name, module in found if module is not None])
    return _library_modules[1]


def _unchanged(owner: str, names: Mapping[str, object]) -> bool:
    """``owner``'s names still bound to the values it was found clean with, in order (a name renamed
    but bound to the same value brings no substitute: the values alone are compared)."""
    values = _found_clean.get(owner, ())
    return len(names) == len(values) and all(map(operator.is_, names.values(), values))


def _scanned(owner: str, names: Mapping[str, object]) -> list[str]:
    """``owner``'s names bound to a test's substitute; none: its names are kept as found clean."""
    found = [
        f"{owner}.{name} = {value!r}"
        for name, value in names.items()
        if isinstance(value, mock.NonCallableMock) or _from_a_test(value)
    ]
    if not found:
        _found_clean[owner] = tuple(names.values())
    return found


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
    import torch

    with torch.no_grad():
        yield


@pytest.fixture
def report(request: pytest.FixtureRequest):
    """``report(text)`` records a measured number for the terminal summary (and prints it)."""

    def record(text: str) -> None:
        line = f"{request.node.nodeid}: {text}"
        MEASUREMENTS.append(line)
        print(line)

    return record


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: hand the numbers to the controller
        workeroutput["gemma4_builds"] = dict(BUILDS)
        workeroutput["gemma4_measurements"] = list(MEASUREMENTS)
        workeroutput["gemma4_kernels"] = _kernels()


def pytest_testnodedown(node, error) -> None:
    output = getattr(node, "workeroutput", {})
    worker = node.workerinput["workerid"]
    _worker_builds[worker] = output.get("gemma4_builds", {})
    _worker_kernels[worker] = output.get("gemma4_kernels", "not reported")
    MEASUREMENTS.extend(output.get("gemma4_measurements", []))


def pytest_terminal_summary(terminalreporter) -> None:
    write = terminalreporter.write_line
    if MEASUREMENTS:
        terminalreporter.section("gemma4 parity measurements")
        for line in sorted(MEASUREMENTS):
            write(line)
    terminalreporter.section("gemma4 model builds")
    per_process = _worker_builds or {"main": dict(BUILDS)}
    for worker, builds in sorted(per_process.items()):
        counts = ", ".join(f"{name}={count}" for name, count in sorted(builds.items())) or "none"
        write(f"{worker}: {counts}")
    if _worker_kernels:
        terminalreporter.section("gemma4 kernels")
        for worker, kernels in sorted(_worker_kernels.items()):
            write(f"{worker}: {kernels}")
