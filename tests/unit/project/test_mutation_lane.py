"""The mutation lane's own logic (``tests/mutation_lane.py``): its shards split the mutated files
between them, each once; an adapter's file contributes its explain methods only; a diff selects the
functions and methods it touches by mutmut's names; the report counts what ran, and a survivor of a
pull request's functions fails it unless written down as equivalent."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests import mutation_lane as lane

ADAPTER = Path("src/gemma4_static/ports/adapters/qnn/port.py")


def test_the_shards_split_the_mutated_files_each_once():
    files = lane.mutated_files()
    assert Path("src/gemma4_static/oracle/episodes/judgement.py") in files and ADAPTER in files
    assert not any("oracle" not in str(path) and "ports" not in str(path) for path in files)
    patterns = [pattern for shard in range(1, 5) for pattern in lane.shard_patterns(shard, 4)]
    assert len(patterns) == len(set(patterns)) == len(files)
    with pytest.raises(ValueError, match=r"shard must be within 1\.\.4, got 5"):
        lane.shard_patterns(5, 4)


def test_an_adapter_contributes_its_explain_methods_only():
    assert lane.file_patterns(ADAPTER) == ["gemma4_static.ports.adapters.qnn.port.*explain__mutmut_*"]
    assert lane.file_patterns(Path("src/gemma4_static/oracle/flow/merge.py")) == ["gemma4_static.oracle.flow.merge.*"]
    source = (lane.ROOT / ADAPTER).read_text().splitlines()
    every_line = set(range(1, len(source) + 1))
    assert lane.function_patterns(ADAPTER, every_line) == [
        "gemma4_static.ports.adapters.qnn.port.xǁQnnGemma4Portǁexplain__mutmut_*"
    ]


def test_a_diff_selects_the_functions_and_methods_it_touches():
    path = Path("src/gemma4_static/oracle/results/report.py")
    source = (lane.ROOT / path).read_text().splitlines()
    status = next(number for number, line in enumerate(source, 1) if "def status" in line) + 3
    skip = next(number for number, line in enumerate(source, 1) if line.startswith("def skip_row")) + 1
    patterns = lane.function_patterns(path, {1, status, skip})  # the docstring's line selects nothing
    module = "gemma4_static.oracle.results.report"
    assert patterns == [f"{module}.x_skip_row__mutmut_*", f"{module}.xǁRowǁstatus__mutmut_*"]


def test_the_report_counts_what_ran_and_lists_the_survivors(monkeypatch):
    statuses = {
        "m.x_a__mutmut_1": "killed",
        "m.x_a__mutmut_2": "killed",
        "m.x_a__mutmut_3": "survived",
        "m.x_b__mutmut_1": "survived",
        "m.x_b__mutmut_2": "timeout",
        "m.x_b__mutmut_3": "not checked",
    }
    monkeypatch.setattr(lane, "EQUIVALENT", {"m.x_b__mutmut_1": "a bound that no input reaches"})
    summary = lane.report(statuses, ["m.*"])
    assert summary["counts"] == {"killed": 2, "not checked": 1, "survived": 2, "timeout": 1}
    assert summary["kill_rate"] == 2 / 5 and summary["survivors"] == ["m.x_a__mutmut_3"]
    assert summary["equivalent"] == {"m.x_b__mutmut_1": "a bound that no input reaches"}
    assert lane.report({}, ["m.*"])["kill_rate"] is None


@pytest.mark.parametrize(("mode", "exit_code"), [(["--changed", "HEAD"], 1), (["--shard", "1/4"], 0)])
def test_a_survivor_fails_a_pull_request_and_not_a_nightly_shard(mode, exit_code, monkeypatch, tmp_path):
    monkeypatch.setattr(lane, "touched_lines", lambda base: {Path("src/gemma4_static/oracle/flow/merge.py"): {60}})
    monkeypatch.setattr(lane, "run_mutmut", lambda patterns, minutes: True)
    monkeypatch.setattr(lane, "results", lambda patterns: {"m.x_a__mutmut_1": "survived", "m.x_a__mutmut_2": "killed"})
    assert lane.main([*mode, "--json", str(tmp_path / "report.json")]) == exit_code
    assert '"kill_rate": 0.5' in (tmp_path / "report.json").read_text()


@pytest.mark.parametrize(("ran", "statuses"), [(False, {}), (True, {"m.x_a__mutmut_1": "not checked"})])
def test_a_run_that_judged_no_mutant_fails(ran, statuses, monkeypatch, tmp_path):
    monkeypatch.setattr(lane, "run_mutmut", lambda patterns, minutes: ran)
    monkeypatch.setattr(lane, "results", lambda patterns: statuses)
    assert lane.main(["--shard", "1/4", "--json", str(tmp_path / "report.json")]) == 2


def test_a_sample_is_drawn_uniformly_by_its_seed():
    names = [f"m.x_f__mutmut_{number}" for number in range(1, 1001)]
    drawn = lane.sample_of(names, 300, seed=0)
    assert len(drawn) == len(set(drawn)) == 300 and set(drawn) <= set(names) and drawn == sorted(drawn)
    assert drawn == lane.sample_of(names, 300, seed=0) != lane.sample_of(names, 300, seed=1)
    first_half = sum(int(name.rsplit("_", 1)[1]) <= 500 for name in drawn)
    assert 120 <= first_half <= 180  # uniform: about half from each half (p < 1e-3 outside)
    assert lane.sample_of(names[:5], 300, seed=0) == names[:5]
    with pytest.raises(ValueError, match="sample must be a positive number of mutants, got 0"):
        lane.sample_of(names, 0, seed=0)


@pytest.mark.parametrize(
    ("killed", "judged", "low", "high"),
    [(0, 10, 0.0, 0.2775), (10, 10, 0.7225, 1.0), (270, 300, 0.8608, 0.9291), (1, 2, 0.0945, 0.9055)],
)
def test_the_interval_is_wilsons(killed, judged, low, high):
    """Reference values: Wilson's score interval at 95% (e.g. 0 of 10: [0, 0.2775])."""
    got = lane.wilson_interval(killed, judged)
    assert got == pytest.approx((low, high), abs=5e-5)
    assert got[0] <= killed / judged <= got[1]
    with pytest.raises(ValueError, match="needs at least one judged mutant, got 0"):
        lane.wilson_interval(0, 0)


def test_a_sample_reports_its_estimate_with_the_interval(monkeypatch, tmp_path):
    names = [f"m.x_a__mutmut_{number}" for number in range(1, 41)]
    monkeypatch.setattr(lane, "every_mutant", lambda: names)
    ran: list[list[str]] = []
    monkeypatch.setattr(lane, "run_mutmut", lambda patterns, minutes: ran.append(patterns) or True)
    statuses = {name: "survived" if name.endswith(("_1", "_2")) else "killed" for name in names}
    monkeypatch.setattr(lane, "results", lambda patterns: {name: statuses[name] for name in patterns})
    assert lane.main(["--sample", "20", "--seed", "3", "--json", str(tmp_path / "report.json")]) == 0
    assert ran == [lane.sample_of(names, 20, seed=3)]
    summary = json.loads((tmp_path / "report.json").read_text())
    survived = sum(name.endswith(("_1", "_2")) for name in ran[0])
    assert summary["kill_rate"] == (20 - survived) / 20
    assert summary["sample"] == {
        "drawn": 20,
        "of": 40,
        "seed": 3,
        "interval": list(lane.wilson_interval(20 - survived, 20)),
    }


def test_the_mutants_are_generated_by_a_run_that_judges_none(monkeypatch):
    calls = []

    def mutmut(command, **kwargs):
        calls.append(command)
        return subprocess.CompletedProcess(command, 1, "", "AssertionError: Filtered ..., but nothing matches")

    monkeypatch.setattr(lane.subprocess, "run", mutmut)
    monkeypatch.setattr(
        lane, "results", lambda patterns: {"m.x_b__mutmut_1": "killed", "m.x_a__mutmut_2": "not checked"}
    )
    assert lane.every_mutant() == ["m.x_a__mutmut_2", "m.x_b__mutmut_1"]
    assert calls == [[*lane.MUTMUT, "run", lane.NO_MUTANT]]
    monkeypatch.setattr(
        lane.subprocess, "run", lambda command, **kwargs: subprocess.CompletedProcess(command, 1, "", "oops")
    )
    with pytest.raises(RuntimeError, match=r"mutmut did not generate the mutants \(exit 1\)"):
        lane.every_mutant()


def test_the_survivors_kept_from_an_earlier_run_are_judged_again(tmp_path):
    """mutmut keeps a result while the function is unchanged, whatever the tests became: the lane
    clears the survivors of the functions it runs (only those), so a new test's kill is seen."""
    meta = tmp_path / "src" / "m.py.meta"
    meta.parent.mkdir()
    kept = {
        "m.x_a__mutmut_1": 0,
        "m.x_a__mutmut_2": 1,
        "m.x_b__mutmut_1": 0,
        "n.x_c__mutmut_1": 0,
        "m.x_d__mutmut_1": None,
    }
    meta.write_text(json.dumps({"exit_code_by_key": kept, "durations_by_key": {"m.x_a__mutmut_1": 1.5}}))
    assert lane.forget_survivors(["m.x_a*", "m.x_b__mutmut_1"], tmp_path) == 2
    after = json.loads(meta.read_text())
    assert after["exit_code_by_key"] == kept | {"m.x_a__mutmut_1": None, "m.x_b__mutmut_1": None}
    assert after["durations_by_key"] == {"m.x_a__mutmut_1": 1.5}  # the rest of mutmut's record kept
    assert lane.forget_survivors(["m.*"], tmp_path / "none yet") == 0  # no mutants folder: nothing kept


@pytest.fixture(autouse=True)
def mutants_folder_of_the_test(monkeypatch, tmp_path):
    """The lane's runs here read and write a folder of the test's own, never a checkout's ``mutants/``."""
    monkeypatch.setattr(lane, "MUTANTS", tmp_path / "mutants")


def _recorded_map(folder: Path, commit: str | None) -> Path:
    """mutmut's recorded map of three tests in two files, its commit (the lane's own file for ``commit``)."""
    folder.mkdir(exist_ok=True)
    stats = {
        "tests_by_mangled_function_name": {
            "m.x_a": ["tests/unit/a/test_one.py::test_x", "tests/unit/b/test_two.py::test_y[1]"],
            "m.x_b": ["tests/unit/b/test_two.py::test_y[1]", "tests/unit/b/test_two.py::test_z"],
        },
        "duration_by_test": {
            "tests/unit/a/test_one.py::test_x": 1.0,
            "tests/unit/b/test_two.py::test_y[1]": 2.0,
            "tests/unit/b/test_two.py::test_z": 3.0,
        },
        "git_commit": "mutmuts",
        "stats_time": 6.0,
    }
    if commit is not None:
        (folder / lane.LANE_COMMIT).write_text(commit + "\n")
    (folder / "mutmut-stats.json").write_text(json.dumps(stats))
    return folder / "mutmut-stats.json"


@pytest.mark.parametrize(
    ("changed", "kept"),
    [
        ({"tests/unit/b/test_two.py"}, ["tests/unit/a/test_one.py::test_x"]),
        ({"tests/unit/a/conftest.py"}, ["tests/unit/b/test_two.py::test_y[1]", "tests/unit/b/test_two.py::test_z"]),
        ({"tests/unit/c/test_three.py"}, None),  # a new file's tests are new to mutmut already
        ({"conftest.py"}, []),
    ],
    ids=["a-test-file", "a-conftest", "another-file", "the-root-conftest"],
)
def test_a_changed_tests_map_is_recorded_again(changed, kept, monkeypatch, tmp_path):
    """mutmut records which functions a test reaches once, by its name: the lane forgets the tests of
    every file changed since (every test below a changed conftest.py), so mutmut records them again
    as new ones; the rest of its record is kept. The diff is against the lane's last commit."""
    stats_file = _recorded_map(tmp_path, "lanes")
    asked = []
    monkeypatch.setattr(lane, "tests_changed_since", lambda commit: asked.append(commit) or changed)
    every = sorted(json.loads(stats_file.read_text())["duration_by_test"])
    assert lane.forget_changed_tests(tmp_path) == len(every) - len(every if kept is None else kept)
    stats = json.loads(stats_file.read_text())
    assert asked == ["lanes"] and sorted(stats["duration_by_test"]) == (every if kept is None else kept)
    for tests in stats["tests_by_mangled_function_name"].values():
        assert set(tests) <= set(stats["duration_by_test"])
    assert (stats["git_commit"], stats["stats_time"]) == ("mutmuts", 6.0)


def test_without_the_lanes_commit_mutmuts_is_read_and_an_unknown_commit_forgets_the_map(monkeypatch, tmp_path):
    stats_file = _recorded_map(tmp_path, None)
    asked = []
    monkeypatch.setattr(lane, "tests_changed_since", lambda commit: asked.append(commit) or None)
    assert lane.forget_changed_tests(tmp_path) == 3 and asked == ["mutmuts"]
    assert not stats_file.exists()  # a shallow clone without that commit: mutmut records every test again
    assert lane.forget_changed_tests(tmp_path) == 0  # no map recorded: nothing to forget


def test_the_changed_test_files_are_read_from_git_and_the_lanes_commit_kept(tmp_path):
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=lane.ROOT, capture_output=True, text=True, check=True)
    assert lane.tests_changed_since("HEAD") is not None
    assert lane.tests_changed_since("0" * 40) is None  # not a commit of this clone
    lane.remember_commit(tmp_path / "none yet")  # no mutmut folder: nothing written
    assert not (tmp_path / "none yet").exists()
    lane.remember_commit(tmp_path)
    assert (tmp_path / lane.LANE_COMMIT).read_text() == head.stdout


@pytest.mark.parametrize("ran", [True, False])
def test_a_run_brings_the_map_up_to_date_first_and_keeps_its_commit_once_mutmut_ran(ran, monkeypatch, tmp_path):
    steps = []
    monkeypatch.setattr(lane, "forget_changed_tests", lambda folder: steps.append(("forget", folder)) or 0)
    monkeypatch.setattr(lane, "run_mutmut", lambda patterns, minutes: steps.append(("run",)) or ran)
    monkeypatch.setattr(lane, "remember_commit", lambda folder: steps.append(("remember", folder)))
    monkeypatch.setattr(lane, "results", lambda patterns: {"m.x_a__mutmut_1": "killed"})
    lane.main(["--shard", "1/4", "--json", str(tmp_path / "report.json")])
    remembered = [("remember", tmp_path / "mutants")] if ran else []
    assert steps == [("forget", tmp_path / "mutants"), ("run",), *remembered]
