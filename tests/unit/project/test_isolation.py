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
