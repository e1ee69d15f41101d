"""No test leaks into another: the two tests that met in a flaky run, back to back in a fresh
process. The CLI fuzzing test substitutes ``run_verification`` while its drawn command lines reach
the verify command, whose module is first imported there; a module that bound the name at import
(``from ... import run_verification``) kept the substitute, and the next verify test met it (then a
MoE refusal, raised inside the verification; since refused before it, the test that runs the verify
command into ``run_verification`` is the self-test's). The suite's own guard (``conftest.py``: no
library name bound to a test's substitute after any test) fails such a test at once, whatever the
order."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.paths import ROOT

pytestmark = pytest.mark.self_test  # the suite's own reliability, beside the fault self-test
BACK_TO_BACK = (
    "tests/unit/commands/test_cli_fuzzing.py::test_bad_command_lines_exit_2_with_one_line",
    "tests/unit/oracle/faults/test_self_test.py::test_self_test_fails_when_the_catching_check_is_removed",
)


def test_the_cli_fuzzing_substitute_never_reaches_the_next_test():
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n0", "--hypothesis-seed=0", *BACK_TO_BACK]
    result = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "2 passed" in result.stdout


def test_an_in_process_session_drops_no_module_a_later_test_imports_again():
    """pytester's in-process session removes the modules it imported when it ends; one of them loaded
    from a C extension that loads once per process (numpy's FFT, imported by torch's dynamo under HF's
    Gemma 4 classes, which the plugin's session imports) then failed the next import of it (scipy's,
    for the mutation lane's interval): five tests failed run after the plugin's page test alone."""
    argv = [
        *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n0"),
        "tests/unit/oracle/pages/test_report_pages.py::test_the_plugin_writes_its_page_with_the_fuzzers_shards",
        "tests/unit/project/test_mutation_lane.py::test_a_sample_reports_its_estimate_with_the_interval",
    ]
    result = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "2 passed" in result.stdout
