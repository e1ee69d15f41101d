"""The self-test asks HF each question once: the fault-free run's answers are recorded and read back
by every fault's run, except where an answer depends on more than the question (an integer
profile's calibrated HF, a mixture of experts pinned at the port's routing) or another recording
already answers."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gemma4_static.oracle.faults import self_test
from gemma4_static.oracle.faults.catalogue import faults_named
from gemma4_static.oracle.faults.faults import Fault
from gemma4_static.oracle.faults.self_test import FaultResult
from gemma4_static.oracle.options import VerifyOptions
from gemma4_static.oracle.references.recording import ACTIVE, Recording
from gemma4_static.oracle.references.reference_folder import judged_live


def test_every_faults_run_reads_back_the_fault_free_runs_answers(tiny_model):
    answering = []
    faults = faults_named(["sliding-window-off-by-one", "final-softcap-missing"])
    options = VerifyOptions(groups=("prefill-masks", "layers"))
    baseline, results = self_test.run_self_test(
        tiny_model, options, faults=faults, on_result=lambda result: answering.append(ACTIVE.get())
    )
    assert baseline and all(result.caught for result in results)
    recording = answering[-1]
    assert recording.asked > len(recording.calls) > 0  # questions asked again, answered from it
    assert ACTIVE.get() is None  # nothing left active after it


def _verifications(monkeypatch) -> list:
    """The recording active in each verification the self-test runs (the verifications stubbed)."""
    active = []
    monkeypatch.setattr(self_test, "run_verification", lambda model, options: active.append(ACTIVE.get()) or [])
    return active


def test_one_recording_answers_the_fault_free_run_and_every_fault(tiny_model, monkeypatch):
    active = _verifications(monkeypatch)
    faults = faults_named(["sliding-window-off-by-one", "final-softcap-missing"])
    self_test.run_self_test(tiny_model, VerifyOptions(), faults=faults)
    assert len(active) == 3 and active[0] is not None and active[0].mode == "record"
    assert all(recording is active[0] for recording in active)


@pytest.mark.parametrize(
    ("moe", "quant", "why"),
    [
        (False, "a8w8", "quant 'a8w8': an integer profile is judged live (its HF side is calibrated in the run)"),
        (True, None, "a mixture-of-experts model is judged live: HF is pinned at the port's routing ties"),
    ],
)
def test_answers_that_depend_on_the_run_are_asked_live(moe, quant, why, monkeypatch):
    model = SimpleNamespace(config=SimpleNamespace(get_text_config=lambda: SimpleNamespace(enable_moe_block=moe)))
    assert judged_live(model, quant) == why
    active = _verifications(monkeypatch)
    self_test.run_self_test(model, VerifyOptions(quant=quant), faults=())
    assert len(active) == 1 and active[0] is None


def test_an_outer_recording_or_a_reference_answers_instead(tiny_model, monkeypatch):
    active = _verifications(monkeypatch)
    outer = Recording("record")
    with outer.active():
        self_test.run_self_test(tiny_model, VerifyOptions(), faults=())
    self_test.run_self_test(tiny_model, VerifyOptions(reference=SimpleNamespace()), faults=())
    assert len(active) == 2 and active[0] is outer  # the same object: an empty recording equals another
    assert active[1] is None  # a reference's own recording is activated by the verification
    assert judged_live(tiny_model, None) is None


def test_each_faults_applicability_is_judged_in_the_runs_own_scheme(monkeypatch):
    """Under ``--quant a8w8`` a fault of the fake quantization itself is run and a float32-only one is
    not (and says the scheme); the verifications stubbed, the faults' runs recorded."""
    _verifications(monkeypatch)
    ran = []
    monkeypatch.setattr(
        self_test, "run_fault", lambda fault, model, options: ran.append(fault.name) or FaultResult(fault)
    )
    of_the_scheme = Fault("ranges-swapped", "a bug of the ranges", (), needs_quant="only an integer profile has ranges")
    float32_only = Fault("one-ulp-off", "a bug below any scheme's resolution", (), float32_only="a change of one ulp")
    model = SimpleNamespace(config=SimpleNamespace(get_text_config=lambda: SimpleNamespace(enable_moe_block=False)))
    _, results = self_test.run_self_test(model, VerifyOptions(quant="a8w8"), faults=(of_the_scheme, float32_only))
    assert ran == ["ranges-swapped"]
    assert [result.not_applicable for result in results] == [None, "below a8w8's resolution: a change of one ulp"]
