"""This runtime's NPU stages as Circle graphs (TICO converts, onert executes) against their modules, on
the tiny model: one graph per stage kind (token embedding, PLE, LM head, the first decoder layer of
each layer type and K/V role in prefill, chunk and decode mode), every one within float32 summation
orders of its module, with the two rewrites the export applies (:mod:`gemma4_static.circle.decompositions`);
and without them, what TICO and onert refuse. The whole model on the ``circle-stages`` backend against
HF: ``tests/parity/test_circle.py`` (nightly)."""

from __future__ import annotations

import pytest

from gemma4_static.circle import decompositions
from gemma4_static.circle.graphs import circle_missing
from gemma4_static.export import stage_cases
from gemma4_static.oracle.checks.circle import circle_rows
from gemma4_static.runtime import StaticGemma4Runtime

pytestmark = [
    pytest.mark.ports,
    pytest.mark.xdist_group("circle"),
    pytest.mark.skipif(circle_missing() is not None, reason=f"Circle graphs need {circle_missing()}"),
]
INF = float("inf")


@pytest.fixture(scope="module")
def cases(tiny_model):
    return stage_cases(StaticGemma4Runtime(tiny_model, max_seq=16, batch_size=2), representative=True)


def test_every_stage_graph_runs_in_onert(cases, report):
    rows = circle_rows(cases)
    assert {row.check.split(" output")[0] for row in rows} == {case.name for case in cases} and len(cases) == 15
    failing = [row for row in rows if row.failed]
    assert not failing, failing
    worst = max(rows, key=lambda row: row.value / row.tolerance)
    report(f"Circle: {len(cases)} stage graphs run in onert, worst {worst.value:.2g} ({worst.check})")


def test_without_the_rewrites_tico_and_onert_refuse_them(cases, monkeypatch):
    """Without the cache placement's rewrite TICO does not convert a K/V-writing decode graph (no
    ``scatter``); without the rank-2 ``linear`` onert refuses a decoder layer at prepare (the first
    layer's prefill and decode graphs)."""
    monkeypatch.setattr(decompositions, "_one_hot_place", decompositions._PLACE)
    monkeypatch.setattr(decompositions, "_rows_linear", decompositions._LINEAR)
    first = [case for case in cases if case.name.startswith("layer00_") and not case.name.endswith("_chunk")]
    refused = {row.check.split(":")[0]: row.check for row in circle_rows(first) if row.value == INF}
    assert sorted(refused) == ["layer00_sliding_attention_produce_decode", "layer00_sliding_attention_produce_prefill"]
    assert "NotYetSupportedError" in refused["layer00_sliding_attention_produce_decode"]
    assert "OnertError" in refused["layer00_sliding_attention_produce_prefill"]
