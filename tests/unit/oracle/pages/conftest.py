"""The report pages' fixtures: three real runs' documents, Debian's Chromium (driven by Playwright,
no browser download) and the folder the screenshots go to."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import torch

from gemma4_static.oracle.faults.catalogue import faults_named
from gemma4_static.oracle.flow.verify import verify
from gemma4_static.oracle.options import VerifyOptions
from gemma4_static.oracle.results.report_json import report_document, run_metadata

CHROMIUM = os.environ.get("GEMMA4_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
# as root, in a machine without a network: no sandbox, nothing started in the background
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]  # fmt: skip


@pytest.fixture(scope="session")  # session: xdist interleaves modules, and a module fixture is built again
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"the browser lane needs Debian's Chromium at {CHROMIUM}: apt-get install chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield launched
        launched.close()


def _document(model, dtype: torch.dtype) -> dict:
    result = verify(model, VerifyOptions(dtype=dtype, schedules_budget=400).without("export"))
    run = run_metadata(
        port=(result.port_name, result.port_version), model="tiny", profile=result.profile, backend="torch",
        kernel_set="native", seeds={"sample prompt": 0},
    )  # fmt: skip
    return report_document(result.verdict, run, {"figures": result.figures})


@pytest.fixture(scope="session")
def documents(tiny_model):
    """The JSON documents of three real runs: float32, bf16, and float32 with a sliding window one too wide."""
    (fault,) = faults_named(["sliding-window-off-by-one"])
    with fault.injected():
        failing = _document(tiny_model, torch.float32)
    return {"float32": _document(tiny_model, torch.float32), "bfloat16": _document(tiny_model, torch.bfloat16),
            "fault": failing}  # fmt: skip


@pytest.fixture(scope="session")
def folder(tmp_path_factory) -> Path:
    chosen = os.environ.get("GEMMA4_SCREENSHOTS")
    path = Path(chosen) if chosen else tmp_path_factory.mktemp("pages")
    path.mkdir(parents=True, exist_ok=True)
    return path
