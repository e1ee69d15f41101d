"""Every extra brings what its commands import: the ``tico`` extra alone builds the embedded models and
runs ``verify --port tico-gemma4`` (PIL for the sample images, torchao for the integer references),
the ``circle`` extra alone converts and runs Circle graphs (TICO, onert where CPython has its wheels,
filelock for the program cache). Read from pyproject.toml, the extras' closures resolved."""

from __future__ import annotations

import re
import tomllib

from tests.paths import ROOT

EXTRAS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def _closure(extra: str) -> dict[str, str]:
    """``distribution -> requirement`` of ``extra`` with the extras it names, recursively."""
    found: dict[str, str] = {}
    for requirement in EXTRAS[extra]:
        nested = re.fullmatch(r"gemma4-static\[(.+)\]", requirement)
        if nested:
            for name in nested.group(1).split(","):
                found |= _closure(name.strip())
        else:
            found[re.split(r"[<>=!;\[ ]", requirement, maxsplit=1)[0].lower()] = requirement
    return found


def test_the_tico_extra_builds_the_models_and_runs_its_port():
    assert {"tico", "pillow", "numpy", "torchao"} <= set(_closure("tico"))


def test_the_circle_extra_converts_and_runs_graphs_where_onert_has_wheels():
    closure = _closure("circle")
    assert {"tico", "pillow", "filelock", "onert"} <= set(closure)
    assert closure["onert"] == "onert==0.1.0; python_version < '3.13'"


def test_the_readme_command_installs_the_circle_extra():
    command = (ROOT / "README.md").read_text().splitlines()[4]
    assert ".venv/bin/pip install -e '.[test,ports,circle]'" in command
