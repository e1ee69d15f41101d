"""This runtime's NPU stages as Circle graphs (TICO converts, onert executes) against their modules, on
the tiny model: one graph per stage kind (token embedding, PLE, LM head, the first decoder layer of
each layer type and K/V role in prefill, chunk and decode mode). Every graph TICO converts runs in
onert within float32 summation orders of its module (the rank-2 ``linear`` rewrite applied: onert
ignores a rank-3 ``FULLY_CONNECTED``'s ``keep_num_dims``); TICO converts no ``scatter``, so the
chunk and decode graphs of the K/V-producing layers (the cache's slot placement) are refused, a
finding this test pins (it fails the day TICO converts them)."""

from __future__ import annotations

import pytest

from gemma4_static.circle.graphs import circle_missing
from gemma4_static.export import stage_cases
from gemma4_static.oracle.checks.circle import circle_rows
from gemma4_static.runtime import StaticGemma4Runtime

pytestmark = [
    pytest.mark.ports,
    pytest.mark.xdist_group("circle"),
    pytest.mark.skipif(circle_missing() is not None, reason=f"Circle graphs: {circle_missing()}"),
]


def test_this_runtimes_stage_graphs_run_in_onert(tiny_model, report):
    runtime = StaticGemma4Runtime(tiny_model, max_seq=16, batch_size=2)
    cases = stage_cases(runtime, representative=True)
    rows = circle_rows(cases)
    refused = sorted(row.check.split(":")[0] for row in rows if row.value == float("inf"))
    producing = [case.name for case in cases if "_produce_" in case.name and not case.name.endswith("_prefill")]
    assert refused == sorted(producing) and len(producing) == 4, refused
    assert all("NotYetSupportedError" in row.check for row in rows if row.value == float("inf"))
    compared = [row for row in rows if row.value != float("inf")]
    assert len({row.check.split(" output")[0] for row in compared}) == len(cases) - 4 == 11
    failing = [row for row in compared if row.failed]
    assert not failing, failing
    worst = max(compared, key=lambda row: row.value / row.tolerance)
    report(
        f"Circle: {len(cases) - 4} of {len(cases)} stage graphs run in onert, worst {worst.value:.2g} ({worst.check})"
    )
