"""The fault catalogue's small parts, in the default suite (the self-test lane runs the faults
themselves): when a fault applies to a model and profile, the patch that tweaks every new instance,
and the self-test's one line per fault."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
import torch

from gemma4_static.oracle.faults.faults import Fault, after_init, setting
from gemma4_static.oracle.faults.self_test import FaultResult, format_result
from gemma4_static.oracle.results.report import Row


def _model(vision: bool, **text_flags: bool) -> SimpleNamespace:
    text = SimpleNamespace(**text_flags)
    config = SimpleNamespace(get_text_config=lambda: text)
    return SimpleNamespace(model=SimpleNamespace(vision_tower=object() if vision else None), config=config)


MOE, RANGES, TINY_ERROR = "enable_moe_block", "a fault of the ranges", "1e-7 off"
F32, BF16 = torch.float32, torch.bfloat16


@pytest.mark.parametrize(
    ("needs", "model", "dtype", "quant", "reason"),
    [
        ({}, _model(vision=False), F32, None, None),
        ({"needs_vision": True}, _model(vision=False), F32, None, "no vision tower"),
        ({"needs_vision": True}, _model(vision=True), F32, None, None),
        ({"needs_text": MOE}, _model(True), F32, None, "no enable_moe_block"),
        ({"needs_text": MOE}, _model(True, enable_moe_block=True), F32, None, None),
        ({"needs_quant": RANGES}, _model(True), F32, None, "of the ranges"),
        ({"needs_quant": RANGES}, _model(True), F32, "a16w8", None),
        ({"float32_only": TINY_ERROR}, _model(True), BF16, None, "below bfloat16's resolution"),
        ({"float32_only": TINY_ERROR}, _model(True), F32, "a8w8", "below a8w8's resolution"),
        ({"float32_only": TINY_ERROR}, _model(True), F32, None, None),
    ],
)
def test_a_fault_applies_where_the_model_and_profile_can_show_it(needs, model, dtype, quant, reason):
    said = Fault("f", "bug", (), **needs).not_applicable(model, dtype, quant)
    assert said is None if reason is None else reason in said


class _Thing:
    def __init__(self, size: int) -> None:
        self.size = size


def test_after_init_tweaks_each_new_instance_after_its_own_init():
    owner, attribute, make = after_init(_Thing, setting("double", lambda thing: 2 * thing.size))
    assert (owner, attribute) == (_Thing, "__init__")
    thing = _Thing.__new__(_Thing)
    make(_Thing.__init__)(thing, 21)
    assert (thing.size, thing.double) == (21, 42)


def test_the_self_tests_line_names_what_caught_a_fault_first():
    fault = Fault("rope-off", "RoPE one position off", ())
    first, second = (
        Row("RoPE", "full_attention", "max abs diff", 1.0, 0.0),
        Row("KV cache", "K", "max abs diff", 2.0, 0.0),
    )
    assert format_result(FaultResult(fault, failed=(first,))) == (
        "CAUGHT  rope-off                       by 1 rows, first: RoPE / full_attention"
    )
    assert format_result(FaultResult(fault, failed=(first, second))).endswith("by 2 rows, first: RoPE / full_attention")
    assert (
        format_result(FaultResult(fault))
        == "MISSED  rope-off                       no check failed: RoPE one position off"
    )
    assert (
        format_result(FaultResult(fault, error="IndexError: 5"))
        == "RAISED  rope-off                       the port raised, but the bug is a silent wrong answer: IndexError: 5"
    )
    assert (
        format_result(FaultResult(dataclasses.replace(fault, raises="a shape no cache takes"), error="IndexError: 5"))
        == "CAUGHT  rope-off                       raised IndexError: 5"
    )
    assert format_result(FaultResult(fault, not_applicable="the model has no vision tower")).startswith(
        "n/a     rope-off"
    )


def test_a_silent_bug_is_caught_only_by_a_comparison_that_fails():
    """A fault that makes the port raise instead of answering wrong is not the bug it describes: it is
    caught by raising only where it says it raises (the checks' own crash never counts)."""
    silent = Fault("rope-off", "RoPE one position off", ())
    loud = dataclasses.replace(silent, raises="a shape no cache takes")
    compared = Row("RoPE", "full_attention", "max abs diff", 1.0, 0.0)
    raised = Row("RoPE", "full_attention: the port raised", "errors", 1, 0, "IndexError: 5", raised="Traceback")
    assert FaultResult(silent, failed=(compared,)).caught and FaultResult(silent, failed=(raised, compared)).caught
    assert not FaultResult(silent, failed=(raised,)).caught and not FaultResult(silent, error="IndexError: 5").caught
    assert FaultResult(loud, failed=(raised,)).caught and FaultResult(loud, error="IndexError: 5").caught
    assert not FaultResult(loud, failed=(compared,), oracle_crashed=True).caught
    assert not FaultResult(silent).caught and not FaultResult(loud).caught
