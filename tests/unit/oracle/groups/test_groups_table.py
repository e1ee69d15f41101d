"""The check groups as declared parts: one file each, one table (``GROUPS``) from which everything
else is derived. A group's name is written in its own file and nowhere else in the package or in a
table of the docs; dropping the documentation's example group into the groups folder is all it
takes to add one (its rows, ``--without``, the docs' table, new-port's test file)."""

from __future__ import annotations

import ast
import importlib.util

import pytest

from gemma4_static.commands.cli import build_parser
from gemma4_static.oracle.groups import BY_NAME, GROUPS, PROFILE_KINDS, kind_of, names
from gemma4_static.oracle.options import VerifyOptions, group_names
from gemma4_static.oracle.session.session import open_session
from tests.paths import PACKAGE, ROOT

GROUPS_FOLDER = PACKAGE / "oracle" / "groups"
CALLS = {"without", "runs", "run_group", "check_group", "runs_in"}  # functions that take a group's name


def test_each_group_is_its_file_and_the_table_is_in_data_flow_order():
    modules = sorted(path.stem for path in GROUPS_FOLDER.glob("*.py") if not path.stem.startswith("_"))
    assert sorted(group.name.replace("-", "_") for group in GROUPS) == modules
    assert [group.order for group in GROUPS] == sorted(group.order for group in GROUPS)
    assert group_names() == tuple(sorted(names())) and set(BY_NAME) == set(names())
    assert names("integer") == names() and "quantization" not in names("float32")  # a group of integer profiles
    assert kind_of("bfloat16", None) == "low precision" and kind_of("float32", "a8w8") == "integer"
    assert all(set(group.profiles) <= set(PROFILE_KINDS) and group.describe for group in GROUPS)


def _group_references(tree: ast.AST) -> list[tuple[int, str]]:
    """String constants used as a check group's name: compared with a row's ``.group``, handed to a
    function that takes group names, a ``groups=`` argument, or ``BY_NAME[...]``."""

    def constants(node: ast.AST) -> list[ast.Constant]:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [node]
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            return [constant for element in node.elts for constant in constants(element)]
        return []

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(isinstance(side, ast.Attribute) and side.attr == "group" for side in sides):
                found += [constant for side in sides for constant in constants(side)]
        elif isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if name in CALLS:
                found += [constant for argument in node.args for constant in constants(argument)]
            found += [constant for keyword in node.keywords if keyword.arg == "groups" for c in [keyword.value]
                      for constant in constants(c)]  # fmt: skip
        elif isinstance(node, ast.Subscript) and getattr(node.value, "id", None) == "BY_NAME":
            found += constants(node.slice)
    return [(constant.lineno, constant.value) for constant in found if constant.value in set(names())]


def test_a_group_name_is_written_nowhere_else():
    """Outside ``oracle/groups/`` no module of the package names a group as a group (a row's group,
    a selection, a lookup), and no table of the docs lists one by hand: each is derived from GROUPS."""
    written = {
        f"{path.relative_to(PACKAGE)}:{line}": name
        for path in PACKAGE.rglob("*.py")
        if GROUPS_FOLDER not in path.parents
        for line, name in _group_references(ast.parse(path.read_text()))
    }
    assert written == {}
    tables = {
        f"{page.relative_to(ROOT)}: {line.strip()}"
        for page in [*ROOT.joinpath("docs").rglob("*.md"), ROOT / "README.md"]
        for line in page.read_text().splitlines()
        if any(line.startswith(f"| `{name}` |") for name in names())
    }
    assert tables == set()


def test_the_scan_finds_a_group_written_by_hand():
    """The scan above is not blind: each way of naming a group by hand is found."""
    source = (
        "rows = [row for row in rows if row.group == 'decode']\n"
        "options = options.without('export')\n"
        "VerifyOptions(groups=('rope', 'layers'))\n"
        "BY_NAME['schedules']\n"
        "decode = 'decode'  # a mode, not a group: not a reference\n"
    )
    found = sorted(_group_references(ast.parse(source)))
    assert found == [(1, "decode"), (2, "export"), (3, "layers"), (3, "rope"), (4, "schedules")]


def test_the_command_line_offers_the_table():
    (verify,) = [action.choices["verify"] for action in build_parser()._actions if getattr(action, "choices", None)
                 and "verify" in action.choices]  # fmt: skip
    (without,) = [action for action in verify._actions if "--without" in action.option_strings]
    assert tuple(without.choices) == group_names() and all(name in without.help for name in names())


@pytest.mark.xdist_group("extended-package")  # one worker copies the package for both
def test_adding_a_group_is_one_new_file(extended_package, tiny_model):
    """The documentation's example group, dropped into a copy of the package's groups folder and
    nothing else changed: it is in the table in its place, ``verify --without`` offers it, the docs'
    table and new-port's test file list it; and its rows, run on a session of the tiny model, PASS."""
    root, said = extended_package
    assert said["groups"][1:3] == ["inputs", "special-embeddings"]  # its place in data-flow order
    (table,) = said["groups table"]
    assert "the port's token embedding of every special id" in table and "the token embedding" in table
    assert said["new-port test reads the table"]
    assert "special-embeddings" in said["verify help"].split("--without GROUP")[-1].split("--port")[0]
    path = root / "gemma4_static" / "oracle" / "groups" / "special_embeddings.py"
    spec = importlib.util.spec_from_file_location("gemma4_static.oracle.groups.special_embeddings", path)
    example = importlib.util.module_from_spec(spec)  # its relative imports resolve in the installed package
    spec.loader.exec_module(example)
    session = open_session(tiny_model, VerifyOptions(groups=("inputs",)))
    try:
        (row,) = example.GROUP.rows(session)
    finally:
        session.close()
    assert row.status == "PASS" and row.check == "vs get_input_embeddings" and row.stage == "token embedding"
