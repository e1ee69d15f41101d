"""The command line's fixtures."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def tmp(tmp_path_factory) -> str:
    """A folder holding one file that is no checkpoint (what fuzzed command lines point at)."""
    folder = tmp_path_factory.mktemp("cli")
    (folder / "file.txt").write_text("not a checkpoint")
    return str(folder)
