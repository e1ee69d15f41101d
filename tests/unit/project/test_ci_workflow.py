"""The CI workflow is valid and runs what the README tells a new user to run."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.paths import ROOT

NIGHTLY = "--gemma4-nightly"  # the lane only CI's nightly job runs
WORKFLOW = ROOT / ".github" / "workflows" / "ci.yml"


def _readme_commands() -> list[str]:
    block = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.DOTALL)
    return block.group(1).strip().splitlines()


def test_workflow_matches_the_github_workflow_schema():
    linter = shutil.which("check-jsonschema", path=str(Path(sys.executable).parent))
    assert linter is not None, "check-jsonschema is part of the test extras"
    result = subprocess.run(
        [linter, "--builtin-schema", "vendor.github-workflows", str(WORKFLOW)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_workflow_installs_and_tests_as_the_readme_says():
    from tests.lanes import OPT_IN_LANES

    main_job, test_command = _readme_commands()[:2]
    install = test_command.split(" && .venv/bin/pytest")[0]
    workflow = WORKFLOW.read_text()
    assert f"run: {install}" in workflow
    lanes = " ".join(option for option in OPT_IN_LANES if option != NIGHTLY)
    assert f".venv/bin/pytest -n auto --hypothesis-profile=ci {lanes}" in workflow  # every slow lane in CI
    assert test_command.endswith(lanes)
    nightly = f".venv/bin/pytest -n auto -m nightly {' '.join(OPT_IN_LANES)}"
    nightly_job = workflow.split("\n  fuzz:", 1)[1]
    assert nightly in nightly_job  # the nightly lane in the nightly job, every marker on
    # the real-size run alone in its own step (its peak resident memory is what it judges), not beside the lane
    from tests.unit.commands import test_verify_checkpoint as real_size

    name = real_size.test_a_checkpoint_of_e2b_real_widths_is_judged_within_its_memory_bound.__name__
    assert f"REAL_SIZE_TEST: {name}" in nightly_job
    alone, beside = nightly_job.split("The nightly lane (", 1)
    assert '--gemma4-nightly "tests/unit/commands/test_verify_checkpoint.py::${{ env.REAL_SIZE_TEST }}"' in alone
    assert '--deselect "tests/unit/commands/test_verify_checkpoint.py::${{ env.REAL_SIZE_TEST }}"' in beside
    assert ".venv/bin/gemma4-static verify --json verify-report.json" in workflow
    assert "--hypothesis-profile=fuzz" in workflow and "path: .hypothesis" in workflow
    from gemma4_static.ports.registry import BUILT_IN

    fuzzed = re.search(r"for port in (.*?); do", workflow)  # the nightly fuzzes every built-in port
    assert fuzzed is not None and fuzzed.group(1).split() == list(BUILT_IN) and "--gemma4-fuzz" in workflow
    assert main_job.endswith(".venv/bin/gemma4-static verify")


def test_ci_script_runs_the_readme_test_command():
    script = (ROOT / ".ci" / "run").read_text().splitlines()
    assert _readme_commands()[1] in script


def test_the_test_command_turns_on_every_slow_lane():
    """A lane the default run skips must still run somewhere: in the README's test command (and CI),
    the nightly lane in CI's nightly job (the README says so)."""
    from tests.lanes import OPT_IN_LANES

    test_command = _readme_commands()[1]
    assert [option for option in OPT_IN_LANES if option not in test_command.split()] == [NIGHTLY]
    assert NIGHTLY in (ROOT / "README.md").read_text()


def test_ci_runs_the_suite_under_every_kernel_set():
    """The CI matrix names every kernel set the project defines, each selected by the project's own
    `gemma4-static kernels --env` (so CI and the kernels lane cannot drift apart)."""
    from gemma4_static.oracle.numerics.kernel_sets import KERNEL_SETS

    workflow = WORKFLOW.read_text()
    matrix = re.search(r"kernel-set: \[(.*?)\]", workflow)
    assert matrix is not None and [name.strip() for name in matrix.group(1).split(",")] == list(KERNEL_SETS)
    assert "gemma4-static kernels --env ${{ matrix.kernel-set }}" in workflow
    assert "--kernel-set ${{ matrix.kernel-set }}" in workflow
    # the numerics lane whole under each set: its nightly tests (the E2B geometry's integer schemes) too
    assert ".venv/bin/pytest -n auto --hypothesis-profile=ci --gemma4-numerics --gemma4-nightly\n" in workflow


def test_ci_covers_every_python_version_and_both_ends_of_the_transformers_range():
    """The compatibility matrix holds the Python versions the package declares (its classifiers, each
    within requires-python) and both ends of its transformers range."""
    from importlib.metadata import metadata, requires

    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet

    declared = metadata("gemma4-static")
    versions = [c.rsplit(" :: ", 1)[1] for c in declared.get_all("Classifier") if re.search(r"Python :: 3\.\d+$", c)]
    assert versions == ["3.11", "3.12", "3.13"]
    assert all(f"{version}.0" in SpecifierSet(declared["Requires-Python"]) for version in versions)
    workflow = WORKFLOW.read_text()
    matrix = re.search(r"python: \[(.*?)\]\n\s+transformers: \[(.*?)\]", workflow)
    assert matrix is not None
    assert [version.strip().strip('"') for version in matrix.group(1).split(",")] == versions
    assert [end.strip() for end in matrix.group(2).split(",")] == ["lowest", "highest"]
    (transformers,) = [Requirement(r) for r in requires("gemma4-static") if r.startswith("transformers")]
    assert {spec.operator for spec in transformers.specifier} == {">=", "<"}  # a range with two ends


def test_ci_records_a_reference_and_judges_from_it_in_four_merged_shards():
    """The record job's folder is what every shard judges from; the shards are 1 to N of one N, and the
    merge job joins exactly them (a shard added to the matrix and not merged would be lost)."""
    workflow = WORKFLOW.read_text()
    assert "gemma4-static record --config e2b-geometry --out reference-e2b" in workflow
    matrix = re.search(r"shard: \[(.*?)\]", workflow)
    assert matrix is not None
    shards = [int(index) for index in matrix.group(1).split(",")]
    assert shards == list(range(1, len(shards) + 1))
    assert f"--reference reference-e2b\n          --shard ${{{{ matrix.shard }}}}/{len(shards)}" in workflow
    merged = " ".join(f"shard-{index}.json" for index in shards)
    assert f"gemma4-static merge {merged}" in workflow


def test_the_nightly_mutation_shards_keep_their_results_and_the_history_to_diff_the_tests_against():
    """mutmut's results are cached between nights; the lane forgets the recorded reach of the tests
    changed since the commit it last ran at, which a shallow checkout would not hold (it would then
    record every test's reach again each night)."""
    job = WORKFLOW.read_text().split("\n  mutation:\n")[1].split("\n  mutation-sample:\n")[0]
    assert "path: mutants" in job and "fetch-depth: 0" in job
    assert "python -m tests.mutation_lane --shard ${{ matrix.shard }}/4" in job
