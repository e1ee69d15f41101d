"""The Circle round-trip rows judge what they are given (the default suite: two small modules, about a
second of conversion): a graph that matches its module passes with something compared, a graph
whose outputs onert gets wrong fails that output's row, a graph TICO refuses is a FAIL row naming
the refusal, and a wrong number of outputs is not silently paired."""

from __future__ import annotations

import json
import math

import pytest
import torch

from gemma4_static.circle import graphs
from gemma4_static.circle.graphs import circle_missing
from gemma4_static.executorch.program_cache import CACHE_ENV
from gemma4_static.export import StageCase
from gemma4_static.oracle.checks.circle import STAGE, circle_rows

pytestmark = pytest.mark.skipif(circle_missing() is not None, reason=f"Circle graphs need {circle_missing()}")


class Project(torch.nn.Module):
    """Two outputs: a projection of ``x`` (B, S, 8) and its sum over the last dim."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(8, 4, bias=False)
        torch.nn.init.normal_(self.proj.weight, generator=torch.Generator().manual_seed(0))

    def forward(self, x):
        projected = self.proj(x)
        return projected, projected.sum(-1)


class Place(torch.nn.Module):
    """A scatter TICO does not convert (no rewrite applies outside the decoder's cache placement)."""

    def forward(self, cache, index, source):
        return cache.scatter(1, index, source)


def _project_case() -> StageCase:
    return StageCase("project", Project().eval(), (torch.randn(2, 3, 8, generator=torch.Generator().manual_seed(1)),))


def test_a_graph_that_matches_its_module_passes(monkeypatch, tmp_path):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    rows = circle_rows([_project_case()])
    (facts,) = [json.loads(path.read_text()) for path in tmp_path.glob("*.json")]
    assert facts["label"] == "project"  # the cache's folder says what it holds
    assert [row.check for row in rows] == ["project output 0", "project output 1"]
    assert all(row.stage == STAGE and row.status == "PASS" for row in rows)
    expected = Project().eval()(*_project_case().args)
    assert [row.tolerance for row in rows] == [2e-5 * max(1.0, float(out.abs().max())) for out in expected]
    assert all(row.value <= 1e-5 for row in rows)


def test_a_wrong_output_from_onert_fails_its_row(monkeypatch):
    original = graphs.CircleSession.__call__
    monkeypatch.setattr(
        graphs.CircleSession,
        "__call__",
        lambda self, tensors: [-original(self, tensors)[0], *original(self, tensors)[1:]],
    )
    rows = circle_rows([_project_case()])
    assert [row.status for row in rows] == ["FAIL", "PASS"] and rows[0].value > 0.1


def _place_case() -> StageCase:
    cache, index = torch.zeros(2, 6, 4), torch.tensor([[[1, 1, 1, 1]], [[3, 3, 3, 3]]])
    return StageCase("place", Place(), (cache, index, torch.ones(2, 1, 4)))


def _is_failed(row, check: str) -> bool:
    return (row.stage, row.check, row.metric, row.value, row.tolerance, row.status) == (
        STAGE,
        check,
        "max abs diff",
        math.inf,
        0.0,
        "FAIL",
    )


def test_a_graph_tico_refuses_is_a_fail_row_naming_it_and_the_next_case_is_judged():
    refused, *judged = circle_rows([_place_case(), _project_case()])
    assert _is_failed(refused, "place: NotYetSupportedError: NOT SUPPORTED OPERATOR IN GRAPH MODULE"), refused
    assert [row.check for row in judged] == ["project output 0", "project output 1"]


def test_a_missing_output_is_a_fail_row(monkeypatch):
    original = graphs.CircleSession.__call__
    monkeypatch.setattr(graphs.CircleSession, "__call__", lambda self, tensors: original(self, tensors)[:1])
    rows = circle_rows([_project_case(), _project_case()])
    assert len(rows) == 2 and all(_is_failed(row, "project: 1 outputs where the module returns 2") for row in rows)


def test_the_passes_to_disable_reach_the_conversion(monkeypatch):
    asked = []
    original = graphs.convert

    def convert(*args, **kwargs):
        asked.append(kwargs["disabled"])
        return original(*args, **kwargs)

    monkeypatch.setattr(graphs, "convert", convert)
    circle_rows([_project_case()], disabled=("RemoveRedundantReshapePattern3",))
    assert asked == [("RemoveRedundantReshapePattern3",)]


def test_a_case_with_keyword_arguments_is_judged_with_them_bound_by_position():
    by_keyword = StageCase("project", Project().eval(), (), {"x": _project_case().args[0]})
    assert [(row.check, row.status) for row in circle_rows([by_keyword])] == [
        ("project output 0", "PASS"),
        ("project output 1", "PASS"),
    ]
