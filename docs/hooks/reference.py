"""MkDocs hook: the reference pages' generated parts, from the code itself, so they cannot drift.

A page holds a marker (``<!-- generated: NAME -->``) where the generated Markdown goes: the command
line's help (``cli``), the report's JSON schema (``report-schema``), the exit codes
(``exit-codes``), the pytest plugin's options (``plugin-options``), the check groups
(``check-groups``), a port's core, capabilities and limits (``port-core``, ``capabilities``,
``port-limits``) and the import contracts (``contracts``)."""

from __future__ import annotations

import argparse
import inspect
import json
import re
from importlib import resources
from typing import Any

MARKER = re.compile(r"<!-- generated: ([a-z-]+) -->")


def _cli() -> str:
    from gemma4_static.commands.cli import build_parser

    parser = build_parser()
    (commands,) = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    sections = [f"```text\n{parser.format_help()}```"]
    for name, command in commands.choices.items():
        sections.append(f"## `gemma4-static {name}`\n\n```text\n{command.format_help()}```")
    return "\n\n".join(sections)


def _report_schema() -> str:
    schema = resources.files("gemma4_static.oracle.results").joinpath("report.schema.json").read_text()
    return f"```json\n{json.dumps(json.loads(schema), indent=2)}\n```"


def _exit_codes() -> str:
    from gemma4_static.oracle.results.verdict import ExitCode

    source = inspect.getsource(ExitCode)
    said = dict(re.findall(r"^\s+([A-Z_]+) = \d+\s+# (.+)$", source, re.MULTILINE))
    rows = [f"| {code.value} | `{code.name}` | {said.get(code.name, '')} |" for code in ExitCode]
    return "| code | name | meaning |\n| --- | --- | --- |\n" + "\n".join(rows)


class _Group:
    def __init__(self) -> None:
        self.options: list[tuple[str, dict[str, Any]]] = []

    def addoption(self, name: str, **kwargs: Any) -> None:
        self.options.append((name, kwargs))


class _Parser:
    def __init__(self) -> None:
        self.group = _Group()

    def getgroup(self, *args: Any) -> _Group:
        return self.group


def _plugin_options() -> str:
    from gemma4_static.commands.pytest_plugin import pytest_addoption

    parser = _Parser()
    pytest_addoption(parser)
    rows = []
    for name, options in parser.group.options:
        metavar = options.get("metavar") or ("{" + ",".join(options["choices"]) + "}" if "choices" in options else "")
        usage = f"{name} {metavar}".strip()
        default = options.get("default")
        rows.append(f"| `{usage}` | {options['help']} | {'' if default is None else f'`{default}`'} |")
    return "| option | what | default |\n| --- | --- | --- |\n" + "\n".join(rows)


def _names(capabilities: tuple) -> str:
    return ", ".join(capability.name for capability in capabilities) or "-"


def _cell(text: str) -> str:
    """``text`` as one Markdown table cell (its pipes escaped)."""
    return text.replace("|", "\\|")


def _check_groups() -> str:
    from gemma4_static.oracle.groups import GROUPS, PROFILE_KINDS

    rows = []
    for group in GROUPS:
        profiles = "every profile" if group.profiles == PROFILE_KINDS else ", ".join(group.profiles) + " profiles"
        lane = "" if group.lane == "default" else f"; {group.lane}"
        needs, reads = _names(group.needs), _names(group.reads)
        rows.append(f"| `{group.name}` | {_cell(group.describe)} | {needs} | {reads} | {profiles}{lane} |")
    head = "| group | what it compares | needs | reads where a port has it | runs in |\n" + "| --- " * 5 + "|\n"
    return head + "\n".join(rows)


def _capabilities() -> str:
    from gemma4_static.oracle.groups import GROUPS
    from gemma4_static.ports.capabilities import capabilities

    rows = []
    for capability in capabilities():
        how = ", ".join(f"`{method}`" for method in capability.methods) or "declared"
        groups = [f"`{group.name}`" for group in GROUPS if capability in (*group.needs, *group.reads)]
        feeds = "; ".join(filter(None, [", ".join(groups), capability.uses]))
        rows.append(f"| {capability.name} | {how} | {_cell(capability.summary)} | {_cell(feeds)} |")
    head = "| capability | methods | what it returns | what judges it |\n| --- | --- | --- | --- |\n"
    return head + "\n".join(rows)


def _port_core() -> str:
    from gemma4_static.ports.core import PortCore

    rows = []
    for name, method in inspect.getmembers(PortCore, inspect.isfunction):
        if not name.startswith("_"):
            summary = " ".join((inspect.getdoc(method) or "").split("\n\n")[0].split())
            signature = str(inspect.signature(method)).replace("'", "")
            rows.append(f"| `{_cell(name + signature)}` | {_cell(summary)} |")
    return "| method | what it does |\n| --- | --- |\n" + "\n".join(rows)


def _port_limits() -> str:
    import dataclasses

    from gemma4_static.ports.limits import PARTS, PortLimits

    rows = []
    for field in dataclasses.fields(PortLimits):
        part = PARTS.get(field.name)
        if part is None:  # a value of its own: its type says it
            rows.append(f"| `{field.name}` | `{_cell(str(field.type))}` | |")
            continue
        fields = ", ".join(f"`{inner.name}`" for inner in dataclasses.fields(part))
        doc = " ".join((inspect.getdoc(part) or "").split("\n\n")[0].split())
        rows.append(f"| `{field.name}` | `{part.__name__}`: {fields} | {_cell(doc)} |")
    return "| concern | fields | what it says |\n| --- | --- | --- |\n" + "\n".join(rows)


def _contracts() -> str:
    import tomllib
    from pathlib import Path

    config = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    rows = []
    for contract in config["tool"]["importlinter"]["contracts"]:
        if contract["type"] == "layers":
            rule = " ← ".join(f"`{_cell(layer)}`" for layer in reversed(contract["layers"]))
            rule = f"inside `{contract['containers'][0]}`: {rule}"
        else:
            rule = f"{', '.join(contract['source_modules'])} never import {', '.join(contract['forbidden_modules'])}"
        rows.append(f"| {contract['name'].split(':')[0]} | {rule} |")
    return "| contract | rule (each room imports only the rooms left of it) |\n| --- | --- |\n" + "\n".join(rows)


def _lanes() -> str:
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "tests" / "lanes.py"
    spec = importlib.util.spec_from_file_location("lanes", path)
    lanes = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lanes)
    rows = [f"| `{option}` | `{marker}` | {_cell(what)} |" for option, (marker, what) in lanes.OPT_IN_LANES.items()]
    return "| option | marker | what it runs |\n| --- | --- | --- |\n" + "\n".join(rows)


GENERATED = {
    "cli": _cli,
    "report-schema": _report_schema,
    "exit-codes": _exit_codes,
    "plugin-options": _plugin_options,
    "check-groups": _check_groups,
    "capabilities": _capabilities,
    "port-core": _port_core,
    "port-limits": _port_limits,
    "contracts": _contracts,
    "lanes": _lanes,
}


ROLE = re.compile(r":(?:func|mod|class|meth|data|attr|exc):`~?([^`]+)`")
RENDERED_ROLE = re.compile(r":(?:func|mod|class|meth|data|attr|exc):\s*(<code>)")


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    """Each marker replaced by its generated Markdown (an unknown marker is an error)."""
    return MARKER.sub(lambda match: ROLE.sub(r"`\1`", GENERATED[match.group(1)]()), markdown)


def on_page_content(html: str, **kwargs: Any) -> str:
    """The Sphinx roles of the docstrings (``:func:`x```) shown as the code they name."""
    return RENDERED_ROLE.sub(r"\1", html)
