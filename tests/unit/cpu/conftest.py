"""The CPU side's fixtures (a fixture that reads a test module's own constant takes it from
``request.module``)."""

from __future__ import annotations

import pytest

from gemma4_static import StaticGemma4Runtime
from gemma4_static.spec import read_model
from gemma4_static.spec.vision import VisionSpec


@pytest.fixture(scope="module")
def runtime(request, tiny_model):
    """This runtime on the tiny model at the requesting module's ``MAX_SEQ``, batch 2."""
    return StaticGemma4Runtime(tiny_model, max_seq=request.module.MAX_SEQ, batch_size=2)


@pytest.fixture(scope="module")
def tiny_vision(tiny_model) -> VisionSpec:
    return read_model(tiny_model)[0].vision
