"""The fuzzer's rules about a port's declared differences from HF, each on one scripted episode: a
port whose static length counts the decode's slot, or whose cache holds every generated token after
``generate``, passes when it declares so and fails when it does not (or declares what it does not
do): the longest prompt the fuzzer sends, the decode it must refuse at the end, and the conversation
it continues after a ``generate`` all follow the declaration."""

from __future__ import annotations

import re

import pytest

from gemma4_static.oracle.fuzz import FuzzTarget
from gemma4_static.oracle.fuzz.machine import Divergence
from gemma4_static.oracle.options import VerifyOptions
from tests.unit.oracle.fuzz import scripted

MODULE = "tests.unit.oracle.contract_ports"
MAX_SEQ = 16


def target_of(port: str, tiny_model) -> FuzzTarget:
    return FuzzTarget.of(tiny_model, VerifyOptions(port=f"{MODULE}:{port}", max_seq=MAX_SEQ))


def full_then_one_more(machine, capacity: int) -> None:
    """A prompt filling the port, then a decode it must refuse."""
    scripted.prefill(machine, [capacity, capacity - 1])
    scripted.decode(machine, 2, [7, 9])  # row 1 reaches capacity, then the step past it must be refused


def generate_then_decode(machine, capacity: int) -> None:
    """A generation of 3 tokens, then a decode step continuing the conversation."""
    scripted.generate(machine, [6, 5], 3)
    scripted.decode(machine, 1, [7, 9])


CASES = {  # port, episode, the divergence it must raise (None: none)
    "ReservesSlot": (full_then_one_more, None),
    "ReservesSlotUndeclared": (full_then_one_more, "the port raised on a prefill it must take"),
    "LeavesAll": (generate_then_decode, None),
    "LeavesAllUndeclared": (generate_then_decode, "logits leave HF's at row 0 position 8 (decode step 0)"),
    "ClaimsLeavesAll": (generate_then_decode, "logits leave HF's at row 0 position 9 (decode step 0)"),
}


@pytest.mark.parametrize("port", CASES)
def test_a_declared_difference_passes_and_an_undeclared_one_fails(port, tiny_model, monkeypatch):
    episode, expected = CASES[port]
    target = target_of(port, tiny_model)
    machine = scripted.started(target, monkeypatch)
    if expected is None:
        episode(machine, target.capacity)
        assert target.coverage["positions compared"] > 0
    else:
        with pytest.raises(Divergence, match=re.escape(expected)) as raised:
            episode(machine, target.capacity)
        row = raised.value.row  # the report row a port's explain is asked about: logits by their error, else counted
        metric = "max abs diff" if expected.startswith("logits") else "divergences"
        assert (row.stage, row.metric, row.status) == ("fuzz", metric, "FAIL")
    target.close()


def test_a_reserved_slot_leaves_the_fuzzer_one_token_fewer(tiny_model, monkeypatch):
    assert [target_of(port, tiny_model).capacity for port in ("LeavesAll", "ReservesSlot")] == [MAX_SEQ, MAX_SEQ - 1]
    target = target_of("ReservesSlot", tiny_model)
    machine = scripted.started(target, monkeypatch)
    full_then_one_more(machine, target.capacity)
    assert target.coverage["refusal"] == 1 and machine.calls[-1]["what"] == "decode past max_seq"
    target.close()


def test_a_divergence_without_its_own_row_is_a_failing_row_holding_its_whole_message():
    """What a port's ``explain`` is asked about when the fuzzer found a call the port must refuse."""
    message = "the port accepted a call it must refuse: a decode before any prefill\n  calls: []"
    row = Divergence(message, []).row
    assert (row.stage, row.check, row.metric, row.status) == ("fuzz", message, "divergences", "FAIL")
    assert row.detail == message
