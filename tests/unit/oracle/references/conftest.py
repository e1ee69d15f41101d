"""The references' fixtures: a saved checkpoint, the default models, a reference recorded once per
session beside the same runs live, and a guard that no model gets built."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

from gemma4_static.commands import cli
from gemma4_static.oracle.flow import verify
from gemma4_static.oracle.options import VerifyOptions
from gemma4_static.oracle.references.checkpoints import load_checkpoint

RECORDED_PORTS = ("gemma4-static", "executorch-gemma4")  # this runtime, and a port recorded on a stand-in


@pytest.fixture(scope="module")
def saved(tiny_model, tmp_path_factory):
    """The tiny model saved with ``save_pretrained``."""
    folder = tmp_path_factory.mktemp("tiny-checkpoint")
    tiny_model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def stored_folders() -> dict[str, Path]:
    """The folders :func:`stored_folder` saved, by model (each read only: saved once per worker)."""
    return {}


@pytest.fixture
def stored_folder(vision_model, request, stored_folders, tmp_path_factory) -> Path:
    """A model with images saved as a checkpoint stores it: bfloat16."""
    name = request.node.callspec.params["vision_model"]
    if name not in stored_folders:
        stored_folders[name] = tmp_path_factory.mktemp(f"stored-{name}")
        copy.deepcopy(vision_model).to(torch.bfloat16).save_pretrained(stored_folders[name])
    return stored_folders[name]


@pytest.fixture
def stored(stored_folder):
    """That checkpoint as HF loads it in its stored bfloat16 (RoPE's frequencies in float32, as HF makes them)."""
    return load_checkpoint(stored_folder)


@pytest.fixture
def loaded_in(stored_folder):
    """``dtype -> model``: that checkpoint loaded by HF in ``dtype`` (its init's numbers in ``dtype``)."""
    return lambda dtype: load_checkpoint(stored_folder, dtype)


@pytest.fixture(params=("tiny", "e2b-vision", "e2b-geometry"))
def default_model(request: pytest.FixtureRequest):
    return request.getfixturevalue(
        {"tiny": "tiny_model", "e2b-vision": "e2b_vision_model"}.get(request.param, "e2b_model")
    )


@pytest.fixture(params=RECORDED_PORTS)
def recorded_port(request) -> str:
    return request.param


@pytest.fixture(scope="session")  # session: xdist interleaves modules, and a module fixture is built again
def recorded(tmp_path_factory):
    """``gemma4-static record`` on the tiny model for :data:`RECORDED_PORTS`."""
    folder = tmp_path_factory.mktemp("reference") / "tiny"
    ports = [argument for port in RECORDED_PORTS for argument in ("--port", port)]
    assert cli.main(["record", "--config", "tiny", "--out", str(folder), *ports, "--quiet"]) == 0
    return folder


@pytest.fixture(scope="session")
def live_rows(tiny_model):
    """The same runs live, per port."""
    return {port: [row.as_dict() for row in verify.verify(tiny_model, VerifyOptions(port=port)).rows]
            for port in RECORDED_PORTS}  # fmt: skip


@pytest.fixture
def no_model(monkeypatch):
    """Building a model fails the test: what it guards is refused before any work."""
    from gemma4_static.oracle.references import models

    def build(name, **kwargs):
        raise AssertionError(f"built {name}: the refusal came after the work")

    monkeypatch.setattr(models, "build_default_model", build)
