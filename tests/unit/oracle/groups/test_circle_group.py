"""The ``circle`` group around its rows: without the ``circle`` extra one SKIP row naming the extra
(and nothing converted); in an integer profile one INFO row per graph, whether TICO converts it (no
onert run). Its float rows: ``test_group_pairs.py`` and ``tests/unit/circle/test_onert_limits.py``."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gemma4_static.circle.graphs import circle_missing
from gemma4_static.oracle.flow.verify import verify
from gemma4_static.oracle.groups import circle as circle_group
from gemma4_static.oracle.options import VerifyOptions
from tests.unit.oracle.groups.circle_ports import masked_attention_case

MISSING = "the circle extra (onert not installed; onert has wheels for CPython 3.10 to 3.12): pip install ..."
PORT = "tests.unit.oracle.groups.circle_ports:CircleAttention"


def test_without_the_extra_the_group_skips_naming_it(monkeypatch, tiny_model):
    monkeypatch.setattr(circle_group, "circle_missing", lambda: MISSING)
    monkeypatch.setattr(circle_group.circle, "shipped_rows", lambda cases: [])  # reaching it would be a bug
    (row,) = verify(tiny_model, VerifyOptions(port=PORT, groups=("circle",))).rows
    assert (row.status, row.group, row.stage, row.check, row.skipped) == (
        "SKIP",
        "circle",
        "circle round-trip",
        "the rest of this group",
        f"Circle graphs need {MISSING}",
    )


@pytest.mark.skipif(circle_missing() is not None, reason=f"Circle graphs need {circle_missing()}")
def test_in_an_integer_profile_each_graph_is_a_conversion_row(monkeypatch):
    """A port in a scheme (its quantized graphs), after its capture step: conversion rows, no onert run."""
    captured = []
    monkeypatch.setattr(circle_group, "after_a_decode_step", captured.append)
    monkeypatch.setattr(circle_group.circle, "shipped_rows", lambda cases: [])  # a float profile's rows: not here
    port = SimpleNamespace(circle_cases=lambda: [masked_attention_case(squeezed=False)])
    session = SimpleNamespace(port=port, scheme=SimpleNamespace(name="a8w8"))
    (row,) = circle_group.circle_group_rows(session)
    assert (row.status, row.check, row.value) == ("INFO", "attention in a8w8: converts as shipped", 1.0)
    assert captured == [session]
