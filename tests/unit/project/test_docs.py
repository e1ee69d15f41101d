"""The documentation: a short README that starts with the two commands, a site that builds in
strict mode (broken links, missing pages and unresolved references fail), reference pages generated
from the code, and the porting guide's five-minute path run exactly as written."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import ROOT

GUIDE = ROOT / "docs" / "porting-guide.md"
BIN = Path(sys.executable).parent
README_LINES = 200


def test_the_readme_is_short_and_starts_with_the_two_commands():
    readme = (ROOT / "README.md").read_text().splitlines()
    assert len(readme) <= README_LINES, f"README.md has {len(readme)} lines; the rest belongs on the site"
    assert readme[2] == "```bash" and readme[3].startswith("python3.11 -m venv .venv && ")
    chromium = "(command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium)) && "
    assert readme[4].startswith(chromium + "python3.11 -m venv .venv && ") and readme[5] == "```"  # the browser lane's


def test_every_page_of_the_docs_folder_is_in_the_navigation():
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = {str(path.relative_to(ROOT / "docs")) for path in (ROOT / "docs").rglob("*.md")}
    assert {page for page in pages if f": {page}" not in nav} == set()


@pytest.mark.browser  # ~6 s: the lane of the pages people read (CI also builds the site in a step)
def test_the_site_builds_in_strict_mode(tmp_path):
    """``mkdocs build --strict`` as CI runs it; the generated reference holds what the code says."""
    mkdocs = shutil.which("mkdocs", path=str(BIN))
    assert mkdocs is not None, "mkdocs is part of the test extras (the docs extra)"
    site = tmp_path / "site"
    environment = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [mkdocs, "build", "--strict", "-d", str(site)], cwd=ROOT, capture_output=True, text=True, env=environment
    )
    assert result.returncode == 0, result.stdout + result.stderr
    cli = (site / "reference" / "cli" / "index.html").read_text()
    assert (
        "gemma4-static verify" in cli and "--gemma4-quant" in (site / "reference" / "plugin" / "index.html").read_text()
    )
    checks = (site / "reference" / "checks" / "index.html").read_text()
    from gemma4_static.oracle.groups import names

    assert all(f"<code>{name}</code>" in checks for name in names())
    codes = (site / "reference" / "report" / "index.html").read_text()
    assert "NOTHING_COMPARED" in codes and "the minimum was not compared" in codes
    assert "StaticGemma4Runtime" in (site / "api" / "index.html").read_text()


def _five_minute_path() -> tuple[list[str], str]:
    """The guide's marked shell commands, in order, and the adapter it fills in."""
    guide = GUIDE.read_text()
    commands = [
        line
        for block in re.findall(r"<!-- five-minute-path -->\n```bash\n(.*?)```", guide, re.DOTALL)
        for line in block.strip().splitlines()
    ]
    adapter = re.search(r"```python\n(# my_npu_filled\.py.*?)```", guide, re.DOTALL).group(1)
    return commands, adapter


@pytest.mark.ports  # a third-party adapter's path, ~18 s: the ports lane
def test_the_porting_guides_five_minute_path_runs_as_written(tmp_path):
    """From an empty folder: the skeleton's verdict is "nothing compared" (exit 5); with the guide's
    prefill and decode filled in, it passes (exit 0) with the coverage the guide shows."""
    commands, adapter = _five_minute_path()
    assert commands == [
        "gemma4-static new-port my-npu",
        "PYTHONPATH=. gemma4-static verify --port my_npu:MyNpuPort",
        "PYTHONPATH=. gemma4-static verify --port my_npu_filled:MyNpuFilled",
    ]
    (tmp_path / "my_npu_filled.py").write_text(adapter)
    environment = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    results = [
        subprocess.run(command, shell=True, cwd=tmp_path, capture_output=True, text=True, env=environment)
        for command in commands
    ]
    new_port, skeleton, filled = results
    assert new_port.returncode == 0 and (tmp_path / "my_npu.py").is_file(), new_port.stderr
    assert skeleton.returncode == 5, skeleton.stdout + skeleton.stderr
    assert "coverage: nothing compared" in skeleton.stdout
    assert filled.returncode == 0, filled.stdout + filled.stderr
    printed = {_row_head(line) for line in filled.stdout.splitlines()}
    verdict = filled.stdout.splitlines()[-1].rsplit(" (", 1)[0]  # without the time
    for page in (GUIDE, ROOT / "README.md"):  # the sample report each shows is what verify printed
        shown = re.search(r"```text\n(PASS.*?)```", page.read_text(), re.DOTALL).group(1).strip().splitlines()
        assert {_row_head(line) for line in shown[:-1]} <= printed, page.name
        assert shown[-1] == verdict, page.name


def _row_head(line: str) -> str:
    """A report row up to its value (status, stage, check, metric; the figures move with the CPU's
    kernels), whitespace collapsed."""
    return " ".join(line.split(" = ")[0].split())


def test_the_porting_guide_names_the_interface_as_the_code_has_it():
    """The guide's list of ``PortSetup`` fields is the dataclass's, and its tables of the core, the
    capabilities and the limits are generated from the code; every public method of a port is the
    core's or one capability's (so those tables name it: a method added outside them fails here)."""
    import dataclasses
    import inspect

    from gemma4_static.ports import Gemma4Port, PortSetup
    from gemma4_static.ports.capabilities import capabilities
    from gemma4_static.ports.core import PortCore

    guide = GUIDE.read_text()
    listed = re.search(r"`PortSetup` fields: (.*?)\.\s", guide, re.DOTALL).group(1)
    assert re.findall(r"`(\w+)`", listed) == [field.name for field in dataclasses.fields(PortSetup)]
    for marker in ("port-core", "capabilities", "port-limits"):
        assert f"<!-- generated: {marker} -->" in guide, marker
    methods = {name for name, _ in inspect.getmembers(Gemma4Port, inspect.isfunction) if not name.startswith("_")}
    core = {name for name, _ in inspect.getmembers(PortCore, inspect.isfunction) if not name.startswith("_")}
    owned = [method for capability in capabilities() for method in capability.methods]
    assert sorted(methods) == sorted([*core, *owned]), "a method of the port that is neither core nor a capability's"
