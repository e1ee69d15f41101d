"""The suite's lanes, declared once: each opt-in lane's option, marker and what it runs (the options,
the markers, the skips of a run without them and the docs read this table), and the guard that
fails a grouped test whose ``xdist_group`` did not take effect. Loaded as a plugin by the root
``conftest.py``."""

from __future__ import annotations

from typing import Any

import pytest

# Lanes too slow for the default run (the README's test command and CI turn them on): option -> (marker, what).
OPT_IN_LANES = {
    "--gemma4-self-test": (
        "self_test",
        "the fault self-test: each catalogued porting bug injected, verify must catch it",
    ),
    "--gemma4-executorch": (
        "executorch",
        "the ExecuTorch lane: the text model as one program, images through the vision and fusion programs, lowered "
        "with XNNPACK (each program lowered once, then read from the program cache; every stage its own program and "
        "the a8w8 programs are the nightly lane's)",
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
        "built wheel, this runtime's stage graphs and three of TICO's in ONE's runtime (onert)",
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
        "what only the nightly job runs (not the README's test command): every stage its own ExecuTorch program and "
        "its own Circle graph (this runtime on onert against HF), TICO's 13 Circle graphs and its int16 ones' "
        "conversion, the "
        "a8w8 programs (the text model as one quantized program, every stage quantized), the one program's traced "
        "twin, the fault self-test inside a lowered program, the plugin from a wheel built and installed in a fresh "
        "venv, the E2B geometry's integer schemes (also in CI's kernel-set matrix), two of executorch-gemma4's four "
        "recipes on the default model, the long context on the 31B and 26B-A4B geometries, the ports' grid and long "
        "context on the E2B geometry, the numerics lane under each kernel set, verify on a checkpoint of E2B's real "
        "widths (its first 10 layers, 3.2 GB in bfloat16) within its memory estimate",
    ),
    "--gemma4-kernels": (
        "kernels",
        "verify (in the dtype whose kernels the set changes) under every CPU kernel set this machine runs (the "
        "numerics lane under each: the nightly lane and CI's kernel-set matrix)",
    ),
}
# markers that are no lane: what a test needs to run at all
NEEDS = {"checkpoint": "needs a real Gemma 4 checkpoint on local disk (--gemma4-checkpoint / GEMMA4_CHECKPOINT)"}
LONGEST_FIRST = ("kernels", "executorch")  # the kernel sets' processes, then the lowering: the workers end together
# then the default suite's property tests, collected last otherwise (loadgroup hands units out in
# collection order: seconds handed out last are a tail one worker runs alone), the rest in that order
LONGEST_UNITS = (
    "tests/unit/test_runtime_state_machine.py",
    "tests/unit/test_ring_properties.py",
    "tests/unit/test_decode_properties.py",
    "tests/unit/test_api_fuzzing.py",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    for option, (_, lane) in OPT_IN_LANES.items():
        parser.addoption(option, action="store_true", help=f"also run {lane}")


def pytest_configure(config: pytest.Config) -> None:
    for option, (marker, lane) in OPT_IN_LANES.items():
        config.addinivalue_line("markers", f"{marker}: {lane} (opt-in: {option})")
    for marker, what in NEEDS.items():
        config.addinivalue_line("markers", f"{marker}: {what}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A lane not asked for is skipped, saying which option runs it; the longest lanes first."""
    for option, (marker, lane) in OPT_IN_LANES.items():
        if config.getoption(option):
            continue
        skip = pytest.mark.skip(reason=f"opt-in lane, pass {option}: {lane}")
        for item in items:
            if item.get_closest_marker(marker) is not None:  # a marker, not a folder of that name
                item.add_marker(skip)
    items.sort(key=_longest_first)


def _longest_first(item: Any) -> tuple[int, int]:
    """``item``'s place: its lane in :data:`LONGEST_FIRST`, then its unit in :data:`LONGEST_UNITS`."""
    lane = next((i for i, marker in enumerate(LONGEST_FIRST) if item.get_closest_marker(marker)), len(LONGEST_FIRST))
    unit = next((i for i, path in enumerate(LONGEST_UNITS) if item.nodeid.startswith(path)), len(LONGEST_UNITS))
    return lane, unit


def lost_group(item: Any, loadgroup: bool) -> str | None:
    """Why ``item`` must not run (its ``xdist_group`` was lost on a loadgroup worker), else ``None``.
    Under ``--dist loadgroup`` a grouped test's node id carries its group (``...::test@group``), which
    is what sends the group to one worker; where a pytest/pytest-xdist pair loses that suffix, every
    worker would build the group's session fixtures (a lowered ExecuTorch bundle, TICO's port, a
    browser) and the run would silently cost minutes more."""
    mark = item.get_closest_marker("xdist_group")
    if not loadgroup or mark is None or "@" in item.nodeid:
        return None
    return (
        f"xdist_group {mark.args[0]!r} did not take effect ({item.nodeid} has no '@' suffix): this pytest "
        "and pytest-xdist do not group under --dist loadgroup; install the pytest range pyproject.toml pins"
    )


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A grouped test whose group was lost fails before its fixtures are built."""
    reason = lost_group(item, getattr(item.config.option, "loadgroup", False))
    if reason:
        pytest.fail(reason, pytrace=False)
