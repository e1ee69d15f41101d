"""The guard that fails a grouped test whose ``xdist_group`` mark did not take effect."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.lanes import LONGEST_UNITS, lost_group
from tests.paths import ROOT


def _item(nodeid: str, group: str | None) -> SimpleNamespace:
    mark = SimpleNamespace(args=(group,)) if group else None
    return SimpleNamespace(nodeid=nodeid, get_closest_marker=lambda name: mark if name == "xdist_group" else None)


def test_a_grouped_test_without_its_suffix_is_refused_on_a_loadgroup_worker():
    assert "'bundle' did not take effect (t.py::b has no '@' suffix)" in lost_group(_item("t.py::b", "bundle"), True)
    assert lost_group(_item("t.py::a@bundle", "bundle"), True) is None
    assert lost_group(_item("t.py::c", None), True) is None
    assert lost_group(_item("t.py::b", "bundle"), False) is None  # not a loadgroup worker


@pytest.mark.xdist_group("worker-groups")
def test_this_runs_groups_took_effect(request):
    """This very test is grouped: under ``-n 2`` its node id carries the group."""
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not an xdist worker under --dist loadgroup (run with -n 2)")
    assert request.node.nodeid.endswith("@worker-groups")


def test_the_longest_units_scheduled_first_exist():
    """A unit renamed away would silently leave the schedule's tail to chance."""
    assert [path for path in LONGEST_UNITS if not (ROOT / path).is_file()] == []
