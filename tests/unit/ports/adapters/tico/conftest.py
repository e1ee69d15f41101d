"""TICO's port's fixtures: the model it takes (the default of a port that needs an image in a fixed
profile) and one verification of it, built once per worker."""

from __future__ import annotations

import pytest

from gemma4_static.oracle.flow.verify import verify
from gemma4_static.oracle.options import VerifyOptions
from gemma4_static.oracle.references.models import PROFILE_MODELS, build_default_model

GRID_BUDGET = 10  # port calls of the schedules grid here: its shortest cases (the whole grid: verify)


@pytest.fixture(scope="session")  # session: xdist interleaves modules, and a module fixture is built again
def model():
    return build_default_model(PROFILE_MODELS[0])


@pytest.fixture(scope="session")
def verification(model):
    """verify --port tico-gemma4 on the E2B-multimodal model (the grid at a lane's budget; its Circle
    graphs, three conversions of each, in ``test_circle_graphs.py``: a telling few here, all nightly)."""
    return verify(model, VerifyOptions(port="tico-gemma4", schedules_budget=GRID_BUDGET).without("circle"))
