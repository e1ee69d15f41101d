"""The check groups' fixtures."""

from __future__ import annotations

import pytest

from gemma4_static.oracle.options import VerifyOptions
from gemma4_static.oracle.session.session import open_session


@pytest.fixture(scope="module")
def weak_fill_session(tiny_model):
    """A session of this runtime with a mask fill of -1, far too weak to mask anything."""
    session = open_session(tiny_model, VerifyOptions(mask_value=-1.0, steps=2, schedules_budget=20))
    yield session
    session.close()
