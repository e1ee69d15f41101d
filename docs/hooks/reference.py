"""MkDocs hook: the reference pages' generated parts, from the code itself, so they cannot drift.

A page holds a marker (``<!-- generated: NAME -->``) where the generated Markdown goes: the command
line's help (``cli``), the report's JSON schema (``report-schema``), the exit codes
(``exit-codes``), the pytest plugin's options (``plugin-options``) and the check groups
(``check-groups``)."""

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


def _check_groups() -> str:
    from gemma4_static.oracle.flow.verify import CHECKS, INTEGER_ONLY

    rows = []
    for name, (rows_of, runtime_only) in CHECKS.items():
        summary = " ".join((inspect.getdoc(rows_of) or "").split("\n\n")[0].split())
        scope = "this runtime only" if runtime_only else "any port"
        scope += ", integer profiles only" if name in INTEGER_ONLY else ""
        rows.append(f"| `{name}` | {scope} | {summary} |")
    return "| group | runs on | what it compares |\n| --- | --- | --- |\n" + "\n".join(rows)


GENERATED = {
    "cli": _cli,
    "report-schema": _report_schema,
    "exit-codes": _exit_codes,
    "plugin-options": _plugin_options,
    "check-groups": _check_groups,
}


ROLE = re.compile(r":(?:func|mod|class|meth|data|attr|exc):`~?([^`]+)`")
RENDERED_ROLE = re.compile(r":(?:func|mod|class|meth|data|attr|exc):\s*(<code>)")


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    """Each marker replaced by its generated Markdown (an unknown marker is an error)."""
    return MARKER.sub(lambda match: ROLE.sub(r"`\1`", GENERATED[match.group(1)]()), markdown)


def on_page_content(html: str, **kwargs: Any) -> str:
    """The Sphinx roles of the docstrings (``:func:`x```) shown as the code they name."""
    return RENDERED_ROLE.sub(r"\1", html)
