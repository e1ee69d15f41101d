"""``gemma4-static merge`` on shards' reports made here: the whole run's rows in order, its verdict,
coverage and exit code, the grid's count rebuilt, overflow's largest site kept; and every refusal
(not a shard, another run, a shard missing or twice, an incomplete shard, a row whose status its
values contradict)."""

from __future__ import annotations

import copy
import json
import math
import re
from types import SimpleNamespace

import pytest

from gemma4_static.commands import cli
from gemma4_static.commands.verify import merge_sections
from gemma4_static.oracle.flow.merge import load_shards, merge_reports
from gemma4_static.oracle.flow.verify import verdict_over
from gemma4_static.oracle.options import VerifyOptions
from gemma4_static.oracle.pages.verify_page import verify_page
from gemma4_static.oracle.results.figures import grid_cell
from gemma4_static.oracle.results.report import Row
from gemma4_static.oracle.results.report_json import report_document, run_metadata
from gemma4_static.oracle.shards import Shard

LAYERS = 2


def _row(group: str, stage: str, check: str, value: float, tolerance: float = 1.0) -> Row:
    return Row(stage, check, "max abs diff", value, tolerance, group=group)


def _grid_row(length: int, value: float) -> Row:
    check = f"prompt {length}: 2 schedules, chunk ends, last token, 3 decode steps"
    return _row("schedules", "schedules", check, value)


def _shard(index: int, count: int, rows: list[Row], cells: list[dict]) -> dict:
    run = run_metadata(
        port=("gemma4-static", "0"), model="tiny", profile="float32", backend="torch", kernel_set="x", seeds={}
    )
    model = SimpleNamespace(config=SimpleNamespace(get_text_config=lambda: SimpleNamespace(num_hidden_layers=LAYERS)))
    written = merge_sections(VerifyOptions(shard=Shard(index, count)), model)  # as verify --shard --json writes it
    assert written == {"shard": {"index": index, "count": count, "num_layers": LAYERS}}
    return report_document(verdict_over(rows, LAYERS), run, {"figures": {"grid": cells}, **written})


def _cell(length: int, outcome: str = "pass") -> dict:
    return grid_cell(length, "one call", f"[{length}]", outcome, value=0.0, tolerance=1.0)


def _whole() -> tuple[list[Row], list[tuple[str, dict]]]:
    """A run's rows, and its two shards' reports as verify --shard writes them."""
    layers = _row("layers", "decoder layers", "layers 0-1 hidden states", 1e-6)
    rope = _row("rope", "RoPE", "full_attention float32", 0.0)
    last = _row("layers", "prefill logits", "last valid token per row", 1e-6)
    logits = _row("decode", "decode steps", "1 rows x 3 steps, logits", 2e-6)
    first = [
        rope,
        _grid_row(1, 0.1),
        _grid_row(9, 0.3),
        Row("schedules", "cases run: 2 (0 refused by the port's limits, 0 over the budget)", "cases", 2, math.inf),
        _row("overflow", "overflow", "embedding, headroom 1e+38x", 3.0, 3.4e38),
    ]
    second = [
        layers,
        last,
        logits,
        _grid_row(5, 0.2),
        Row("schedules", "cases run: 1 (1 refused by the port's limits, 0 over the budget)", "cases", 1, math.inf),
        _row("overflow", "overflow", "embedding, headroom 5e+37x", 7.0, 3.4e38),
    ]
    for rows in (first, second):
        for index, row in enumerate(rows):
            rows[index] = Row(**{**row.__dict__, "group": row.group or "schedules"})
    shards = [
        ("a.json", _shard(1, 2, first, [_cell(1), _cell(9)])),
        ("b.json", _shard(2, 2, second, [_cell(5), _cell(13, "refused")])),
    ]
    return first + second, shards


def test_shards_merge_into_the_whole_runs_rows_and_verdict():
    _, shards = _whole()
    merged = merge_reports(shards)
    checks = [row["check"] for row in merged["rows"]]
    assert checks == [
        "full_attention float32",
        "layers 0-1 hidden states",
        "last valid token per row",
        "1 rows x 3 steps, logits",
        "prompt 1: 2 schedules, chunk ends, last token, 3 decode steps",
        "prompt 5: 2 schedules, chunk ends, last token, 3 decode steps",
        "prompt 9: 2 schedules, chunk ends, last token, 3 decode steps",
        "cases run: 3 (1 refused by the port's limits, 0 over the budget)",
        "embedding, headroom 5e+37x",  # the largest of the shards' overflow rows for that site
    ]
    assert merged["exit_code"] == 0 and merged["passed"]
    (cases,) = [row for row in merged["rows"] if row["check"].startswith("cases run")]
    assert (cases["stage"], cases["group"], cases["metric"], cases["value"]) == ("schedules", "schedules", "cases", 3)
    assert merged["coverage"].startswith("2 of 2 layers")
    assert [cell["length"] for cell in merged["figures"]["grid"]] == [1, 5, 9, 13]
    assert merged["merged"] == {"shards": ["a.json", "b.json"]}
    backwards = merge_reports(list(reversed(shards)))  # the order given does not matter: shards by index
    assert backwards["rows"] == merged["rows"] and backwards["merged"] == {"shards": ["a.json", "b.json"]}
    renamed = merge_reports([("2.json", shards[0][1]), ("1.json", shards[1][1])])  # by index, not by name
    assert renamed["rows"] == merged["rows"] and renamed["merged"] == {"shards": ["2.json", "1.json"]}


def test_a_row_of_a_group_the_table_does_not_name_comes_after_the_tables_groups():
    """A port's own row (a group outside :data:`GROUPS`, as a third-party port may report) is kept,
    after every row of the table's groups, in its shard's order."""
    own = _row("its own check", "own stage", "own check", 0.0)
    first = [own, _row("rope", "RoPE", "full_attention float32", 0.0)]
    second = [_row("layers", "decoder layers", "layers 0-1 hidden states", 1e-6)]
    merged = merge_reports([("a.json", _shard(1, 2, first, [])), ("b.json", _shard(2, 2, second, []))])
    checks = [row["check"] for row in merged["rows"]]
    assert checks == ["full_attention float32", "layers 0-1 hidden states", "own check"]


def test_a_failing_row_in_any_shard_fails_the_merged_run():
    _, shards = _whole()
    failing = copy.deepcopy(shards)
    row = failing[1][1]["rows"][3]
    row.update(value=5.0, status="FAIL")
    merged = merge_reports(failing)
    assert merged["exit_code"] == 1 and merged["counts"]["FAIL"] == 1


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda shards: shards[:1], r"needs shards 1 to 2 once each, got \[1\]"),
        (lambda shards: [shards[0], shards[0]], r"got \[1, 1\]"),
        (lambda shards: [shards[0], ("c.json", {**shards[1][1], "model": "e2b-geometry"})], "shard of another run"),
        (lambda shards: [shards[0], ("c.json", {**shards[1][1], "shard": None})], "not a shard"),
        (lambda shards: [shards[0], ("c.json", {**shards[1][1], "incomplete": "cut"})], "is incomplete"),
        (
            lambda shards: [shards[0], ("c.json", {**shards[1][1], "shard": {**shards[1][1]["shard"], "count": 3}})],
            "one of 3 shards",
        ),
    ],
)
def test_shards_that_do_not_make_one_run_are_refused(change, message):
    _, shards = _whole()
    with pytest.raises(ValueError, match=message):
        merge_reports(change(shards))


def test_a_row_whose_status_its_values_contradict_is_refused():
    _, shards = _whole()
    shards[0][1]["rows"][0]["status"] = "FAIL"  # value 0 within tolerance 1: a PASS
    with pytest.raises(ValueError, match="says FAIL, its values say PASS"):
        merge_reports(shards)


def test_merge_command_prints_the_verdict_and_writes_the_report(tmp_path, capsys):
    _, shards = _whole()
    paths = []
    for name, document in shards:
        paths.append(tmp_path / name)
        paths[-1].write_text(json.dumps(document))
    out = tmp_path / "merged.json"
    assert cli.main(["merge", *map(str, paths), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "merge: 2 shards of tiny (gemma4-static)" in printed and "verdict: passed (exit 0)" in printed
    assert json.loads(out.read_text())["counts"]["PASS"] == 8
    assert cli.main(["merge", str(paths[0])]) == 2
    assert "needs shards 1 to 2 once each" in capsys.readouterr().err


def test_the_merged_page_says_it_joins_shards():
    _, shards = _whole()
    page = verify_page(merge_reports(shards))
    assert '<p id="merged">merged from 2 shards: a.json, b.json</p>' in page
    assert '<p id="shard">shard 1 of 2: one part of a run</p>' in verify_page(shards[0][1])


def _other(shards, **changes):
    """The second shard with ``changes`` made (``metadata.FIELD``, ``model``, ``reference``)."""
    document = shards[1][1]
    document = copy.deepcopy(document)
    for field, value in changes.items():
        if field.startswith("metadata."):
            document["metadata"][field.removeprefix("metadata.")] = value
        else:
            document[field] = value
    return [shards[0], ("c.json", document)]


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"metadata.profile": "bfloat16"}, "profile 'bfloat16'"),
        ({"metadata.backend": "executorch"}, "backend 'executorch'"),
        ({"metadata.port": {"name": "executorch-gemma4", "version": "1"}}, "port {'name': 'executorch-gemma4'"),
        ({"model": "e2b-geometry"}, "model 'e2b-geometry'"),
        ({"reference": {"answers": "recorded: tiny-1"}}, "reference 'recorded: tiny-1'"),
    ],
    ids=lambda value: str(value)[:30],
)
def test_every_part_of_a_shards_identity_must_match(change, named):
    """Each part of what makes shards one run (profile, backend, port, model, the reference's answers)
    refused alone, named with the other shard's value."""
    _, shards = _whole()
    with pytest.raises(ValueError, match=f"c.json is a shard of another run: {re.escape(named)}"):
        merge_reports(_other(shards, **change))


def test_shards_are_loaded_under_their_paths(tmp_path):
    _, shards = _whole()
    paths = []
    for name, document in shards:
        (tmp_path / name).write_text(json.dumps(document))
        paths.append(tmp_path / name)
    assert [name for name, _ in load_shards(paths)] == [str(path) for path in paths]


def test_what_every_shard_carries_reaches_the_merged_report():
    """The reference both shards were judged from, each shard's figures beside the grid, the grid's cells
    in order with refused and over-budget ones last (counted as not run), a shard without figures, a
    row every shard wrote kept once, a non-finite value read back as NaN."""
    _, shards = _whole()
    first, second = (copy.deepcopy(document) for _, document in shards)
    for document in (first, second):
        document["reference"] = {"answers": "recorded: tiny-1"}
    first["figures"]["layers"] = [{"layer": 0, "value": 1e-6}]
    second["figures"]["grid"].append(_cell(3, "over budget"))
    blank = {key: "" for key in ("detail", "skipped", "expected", "raised")}
    skipped = {**blank, "stage": "schedules", "check": "images", "metric": "not checked", "value": None,
               "tolerance": None, "status": "SKIP", "skipped": "no image profile", "group": "schedules",
               "higher_is_better": False, "hf": None}  # fmt: skip
    for document in (first, second):
        document["rows"].append(dict(skipped))
    nan = {**skipped, "stage": "conversation", "check": "prefill again", "metric": "max abs diff",
           "tolerance": 1.0, "status": "FAIL", "skipped": "", "group": "decode"}  # fmt: skip
    second["rows"].append(nan)
    merged = merge_reports([("a.json", first), ("b.json", second)])
    assert merged["reference"] == {"answers": "recorded: tiny-1"}
    assert merged["figures"]["layers"] == [{"layer": 0, "value": 1e-6}]
    assert [(cell["length"], cell["outcome"]) for cell in merged["figures"]["grid"]][-2:] == [
        (3, "over budget"),
        (13, "refused"),
    ]
    assert [row["check"] for row in merged["rows"]].count("images") == 1  # every shard wrote it: once
    (again,) = [row for row in merged["rows"] if row["check"] == "prefill again"]
    assert again["status"] == "FAIL" and again["value"] is None and merged["exit_code"] == 1
    assert "cases run: 3 (1 refused by the port's limits, 1 over the budget)" in [
        row["check"] for row in merged["rows"]
    ]
    del first["figures"], second["figures"]
    assert merge_reports([("a.json", first), ("b.json", second)])["figures"]["grid"] == []
