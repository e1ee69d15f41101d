"""A copy of the package with files added or changed, and Python run against it: how the tests show
what one more file does (a check group, a capability, a forbidden import) without touching the
checkout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.paths import PACKAGE, ROOT


def package_copy(root: Path, changes: dict[str, str]) -> Path:
    """``gemma4_static`` copied under ``root`` with each file of ``changes`` (a path inside the package
    -> its new text) written; ``root``, to put on ``PYTHONPATH``."""
    copy = root / "gemma4_static"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    for path, text in changes.items():
        (copy / path).write_text(text)
    return root


def run_against(root: Path, *arguments: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """``python ARGUMENTS`` with the copy under ``root`` first on the path (from the checkout by default,
    where ``docs/hooks`` lies)."""
    environment = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([sys.executable, *arguments], cwd=cwd, capture_output=True, text=True, env=environment)
