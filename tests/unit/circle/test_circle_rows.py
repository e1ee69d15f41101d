"""The Circle round-trip rows judge what they are given (the default suite: two small modules, about a
second of conversion): a graph that matches its module passes with something compared, a graph
whose outputs onert gets wrong fails that output's row, a graph TICO refuses is a FAIL row naming
the refusal, and a wrong number of outputs is not silently paired."""

from __future__ import annotations

import math

import pytest
import torch

from gemma4_static.circle import graphs
from gemma4_static.circle.graphs import circle_missing
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


def test_a_graph_that_matches_its_module_passes():
    rows = circle_rows([_project_case()])
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


def test_a_graph_tico_refuses_is_a_fail_row_naming_it():
    cache, index = torch.zeros(2, 6, 4), torch.tensor([[[1, 1, 1, 1]], [[3, 3, 3, 3]]])
    rows = circle_rows([StageCase("place", Place(), (cache, index, torch.ones(2, 1, 4)))])
    assert len(rows) == 1 and rows[0].status == "FAIL" and rows[0].value == math.inf
    assert rows[0].check.startswith("place: NotYetSupportedError: "), rows[0].check


def test_a_missing_output_is_a_fail_row(monkeypatch):
    original = graphs.CircleSession.__call__
    monkeypatch.setattr(graphs.CircleSession, "__call__", lambda self, tensors: original(self, tensors)[:1])
    (row,) = circle_rows([_project_case()])
    assert row.check == "project: 1 outputs where the module returns 2" and row.status == "FAIL"
