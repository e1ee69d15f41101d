"""The models every folder of the suite judges: Gemma 4 models built once per session (and per xdist
worker), the tiny one saved as a bfloat16 checkpoint, the opt-in real checkpoint, and code that
builds a model by name handed the session's."""

from __future__ import annotations

import copy
import os
from pathlib import Path

import pytest

from tests.package_copy import EXTENDED_PROBE, documented_example, package_copy, run_against
from tests.suite import BUILDS

MODEL_PARAMS = ("tiny", "e2b-geometry", "checkpoint")
CHECKPOINT_ENV = "GEMMA4_CHECKPOINT"
SESSION_MODELS = {
    "tiny": "tiny_model",
    "e2b-vision": "e2b_vision_model",
    "e2b-geometry": "e2b_model",
    "26b-a4b-geometry": "moe_geometry_model",
}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--gemma4-checkpoint",
        default=None,
        metavar="PATH",
        help=f"local folder of a real Gemma 4 checkpoint (default: ${CHECKPOINT_ENV}); tests on it are skipped without",
    )


@pytest.fixture
def _hf_classes_imported() -> None:
    from gemma4_static.oracle.references import models  # noqa: F401 (HF's Gemma 4 classes with it)


@pytest.fixture
def pytester(_hf_classes_imported: None, pytester: pytest.Pytester) -> pytest.Pytester:
    """pytest's ``pytester``, made after HF's Gemma 4 classes are imported: its in-process sessions
    remove the modules imported since it was made, and the plugin's session imports those classes,
    with them a C extension that loads once per process (numpy's FFT, through torch's dynamo) that a
    later test's import (scipy's) could then not load again."""
    return pytester


def _build(name: str):
    from gemma4_static.oracle.references import models  # here: the xdist controller never imports HF

    BUILDS[name] += 1
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
def saved_bfloat16(tiny_model, tmp_path_factory) -> Path:
    """The tiny model saved with ``save_pretrained`` in bfloat16, as every Gemma 4 checkpoint is stored."""
    import torch  # here: the xdist controller, which loads this file too, imports no torch

    folder = tmp_path_factory.mktemp("tiny-bfloat16")
    copy.deepcopy(tiny_model).to(torch.bfloat16).save_pretrained(folder)
    return folder


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

    BUILDS["checkpoint"] += 1
    return load_checkpoint(path)


@pytest.fixture(params=MODEL_PARAMS)
def gemma4_model(request: pytest.FixtureRequest):
    """Every model the suite checks: the two embedded ones and the opt-in checkpoint."""
    fixture = {"tiny": "tiny_model", "e2b-geometry": "e2b_model", "checkpoint": "checkpoint_model"}[request.param]
    return request.getfixturevalue(fixture)


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


@pytest.fixture(scope="session")
def _session_hf_answers():
    from gemma4_static.oracle.references.recording import Recording

    return Recording("record")


@pytest.fixture
def hf_answers_kept(_session_hf_answers):
    """HF's answers kept for the session (this worker's): a ``record`` recording active for the test,
    each answer keyed by its question (the call, its arguments' content, the model by its weights)
    and read back when asked again, so tests judging many ports, faults or backends against the same
    model ask HF each question once. Not for a test that edits a model in place (a model's weights
    are digested once per object), nor where an answer depends on more than its question (the
    library's ``judged_live``: a mixture of experts pinned at the port's routing)."""
    with _session_hf_answers.active():
        yield _session_hf_answers


@pytest.fixture(scope="session")
def extended_package(tmp_path_factory) -> tuple[Path, dict]:
    """A copy of the package with the docs' example check group and example capability added (one
    new file each, nothing else changed), and what it says of itself (:data:`EXTENDED_PROBE`, one
    process for the groups' and the capabilities' tests)."""
    import json

    changes = {
        "oracle/groups/special_embeddings.py": documented_example("reference/checks.md", "example-group"),
        "ports/capabilities/memory_report.py": documented_example("porting-guide.md", "example-capability"),
    }
    root = package_copy(tmp_path_factory.mktemp("extended"), changes)
    result = run_against(root, "-c", EXTENDED_PROBE)
    assert result.returncode == 0, result.stderr
    return root, json.loads(result.stdout)
