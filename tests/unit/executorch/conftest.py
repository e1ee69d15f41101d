"""The ExecuTorch room's fixtures."""

from __future__ import annotations

import pytest

from gemma4_static.executorch import program_cache
from gemma4_static.executorch.program_cache import CACHE_ENV


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """An empty disk cache and no program held in this process."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "programs"))
    monkeypatch.setattr(program_cache, "_IN_PROCESS", {})
    return tmp_path / "programs"
