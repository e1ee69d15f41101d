"""A copy of the package with files added or changed, and Python run against it: how the tests show
what one more file does (a check group, a capability, a forbidden import) without touching the
checkout."""

from __future__ import annotations

import os
import re
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


def documented_example(page: str, marker: str) -> str:
    """The Python block after ``<!-- MARKER -->`` on a page of the docs (an example a test runs)."""
    text = (ROOT / "docs" / page).read_text()
    match = re.search(rf"<!-- {marker} -->\n```python\n(.*?)```", text, re.DOTALL)
    if match is None:
        raise ValueError(f"docs/{page} has no python block after <!-- {marker} -->")
    return match.group(1)


# what a copy of the package with the docs' example group and capability added says of itself
EXTENDED_PROBE = """
import json, sys
sys.path.insert(0, 'docs/hooks')
import reference
from gemma4_static.commands.cli import build_parser
from gemma4_static.commands.new_port import TEST, capability_stubs
from gemma4_static.oracle.groups import names
from gemma4_static.ports import Gemma4Port, NotExposed
from gemma4_static.ports.capabilities import implemented, named

class Reports(Gemma4Port):
    def memory_bytes(self):
        return 1

capability = named('its memory report')
try:
    Gemma4Port().memory_bytes()
    default = 'no refusal'
except NotExposed as reason:
    default = str(reason)
commands = next(action for action in build_parser()._actions if getattr(action, 'choices', None))
print(json.dumps({
    'groups': list(names()),
    'groups table': [line for line in reference._check_groups().splitlines() if 'special-embeddings' in line],
    'new-port test reads the table': 'names("float32")' in TEST,
    'verify help': ' '.join(commands.choices['verify'].format_help().split()),
    'default': default,
    'implemented': [implemented(Reports, capability), implemented(Gemma4Port, capability)],
    'skeleton': 'def memory_bytes(self) -> int' in capability_stubs(),
    'capabilities table': [line for line in reference._capabilities().splitlines() if 'its memory report' in line],
}))
"""
