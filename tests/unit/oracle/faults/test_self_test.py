"""The fault catalogue and ``verify --self-test``: every catalogued porting bug is caught by some
check, and a self-test that lost the check catching a fault fails."""

from __future__ import annotations

import pytest

from gemma4_static.commands import cli
from gemma4_static.oracle.checks import parity
from gemma4_static.oracle.faults.catalogue import CATALOGUE, FAULT_NAMES, faults_named
from gemma4_static.oracle.faults.faults import Fault
from gemma4_static.oracle.faults.self_test import format_result, run_fault, run_self_test
from gemma4_static.oracle.flow.verify import run_verification, verify
from gemma4_static.oracle.options import VerifyOptions

pytestmark = [
    pytest.mark.usefixtures(
        "reuse_session_models",  # the command gets the session's models
        "hf_answers_kept",  # HF asked each question once (faulty and correct runs share it)
    ),
    pytest.mark.xdist_group("verify-tiny"),  # on one worker with the verify command's runs: HF's answers are a worker's
]


def test_the_catalogue_names_at_least_fifteen_distinct_bugs():
    assert len(CATALOGUE) >= 15 and len(set(FAULT_NAMES)) == len(CATALOGUE)
    assert all(fault.bug and fault.patches for fault in CATALOGUE)


@pytest.mark.self_test
@pytest.mark.parametrize("name", FAULT_NAMES)
def test_each_fault_is_caught(request, name, report):
    """Runs with ``--gemma4-self-test`` (as ``gemma4-static verify --self-test`` does), on the tiny
    model, or for a bug of K = V or MoE layers on the 26B-A4B geometry (which has both); a bug of the
    fake quantization in the a16w8 profile (float32 runs none of it)."""
    (fault,) = faults_named([name])
    model = request.getfixturevalue("moe_geometry_model" if fault.needs_text else "tiny_model")
    result = run_fault(fault, model, VerifyOptions(quant="a16w8" if fault.needs_quant else None))
    report(format_result(result))
    assert result.caught, format_result(result)


def test_a_fault_leaves_nothing_behind(tiny_model):
    """After a fault's block the runtime is itself again (patches undone, cached tables dropped)."""
    with faults_named(["sliding-window-off-by-one"])[0].injected():
        assert any(row.failed for row in run_verification(tiny_model, VerifyOptions(groups=("prefill-masks",))))
    assert not any(
        row.failed for row in run_verification(tiny_model, VerifyOptions(groups=("prefill-masks", "decode")))
    )


def test_a_fault_is_judged_up_to_the_first_group_that_fails(tiny_model):
    """Once a group fails the fault is caught: the groups after it are not run (the fault-free run
    runs them all)."""
    checks = ("inputs", "prefill-masks", "rope", "decode")
    with faults_named(["sliding-window-off-by-one"])[0].injected():
        rows = verify(tiny_model, VerifyOptions(groups=checks, until_failure=True)).rows
    failed = [row for row in rows if row.failed]
    assert failed and failed[0].group == "prefill-masks"
    assert {row.group for row in rows} == {"inputs", "prefill-masks"}
    clean = verify(tiny_model, VerifyOptions(groups=checks, until_failure=True)).rows
    assert {row.group for row in clean} == set(checks)


def test_self_test_fails_when_the_catching_check_is_removed(capsys):
    """A uniform RoPE shift cancels in q.k (logits do not move); only the RoPE rows, the cached K
    (stored rotated; after the prefill and after the chunked prefill) and the long context (where
    the shifted table's last row stands in for the last two positions) see it: without those four
    check groups it is missed."""
    args = [
        "verify",
        "--self-test",
        "--fault",
        "rope-positions-from-one",
        "--without",
        "decode",
        "--without",
        "schedules",
    ]
    assert cli.main(args) == 0
    assert "CAUGHT  rope-positions-from-one" in capsys.readouterr().out
    missing = ["rope", "layers", "chunked-prefill", "long-positions"]
    assert cli.main([*args, *(option for group in missing for option in ("--without", group))]) == 1
    captured = capsys.readouterr()
    assert "MISSED  rope-positions-from-one" in captured.out
    assert "no check catches ['rope-positions-from-one']" in captured.err


def test_a_fault_the_model_cannot_show_is_not_run_and_says_why(tiny_model):
    moe_only = Fault("moe-only", "a bug of the expert block", (), needs_text="enable_moe_block")
    baseline, (result,) = run_self_test(tiny_model, VerifyOptions(groups=("inputs",)), faults=(moe_only,))
    assert baseline and result.not_applicable == "the model has no enable_moe_block" and result.failed == ()


def test_unknown_names_are_usage_errors(capsys):
    assert cli.main(["verify", "--self-test", "--fault", "no-such-bug"]) == 2
    assert "unknown fault names ['no-such-bug']" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:  # a group not in the table: argparse's own usage error
        cli.main(["verify", "--self-test", "--without", "no-such-check"])
    assert exited.value.code == 2
    assert "argument --without: invalid choice: 'no-such-check' (choose from 'chunk-masks'" in capsys.readouterr().err


def test_a_crash_in_the_checks_is_not_a_catch(tiny_model, monkeypatch):
    """A check that raises proves nothing about the fault: the result is BROKEN, not CAUGHT."""

    def broken_check(*args, **kwargs):
        raise IndexError("a broken check")

    monkeypatch.setattr(parity, "logits_rows", broken_check)
    result = run_fault(faults_named(["final-softcap-missing"])[0], tiny_model, VerifyOptions(groups=("layers",)))
    assert result.oracle_crashed and not result.caught and not result.passed
    assert format_result(result).startswith("BROKEN  final-softcap-missing")
