"""The port's ranges report judged by what it names: a range under a name the scheme does not have is
counted as the port's and compared with nothing; a port whose names match none of the scheme's sites
compares nothing and fails (NaN, never a pass); one reporting only some sites is judged on those,
the count saying how many."""

from __future__ import annotations

import dataclasses
import math

import pytest

from gemma4_static.oracle.faults.static_faults import RECIPES, StaticSchemePort
from gemma4_static.oracle.flow.verify import verify
from gemma4_static.oracle.options import VerifyOptions
from gemma4_static.ports import NotExposed
from gemma4_static.ports.limits import SchemeLimits


class ExtraSite(StaticSchemePort):
    def observed_ranges(self):
        return {**super().observed_ranges(), "no such site": (-1.0, 1.0)}


class Renamed(StaticSchemePort):
    def observed_ranges(self):
        return {f"{name} (renamed)": bounds for name, bounds in super().observed_ranges().items()}


class HalfTheSites(StaticSchemePort):
    def observed_ranges(self):
        ranges = super().observed_ranges()
        return dict(list(ranges.items())[: len(ranges) // 2])


CASES = {  # port: (the rows' check starts, whether they fail)
    "ExtraSite": ("83 of its 84 calibrated ranges", False),
    "Renamed": ("0 of its 83 calibrated ranges", True),
    "HalfTheSites": ("41 of its 41 calibrated ranges", False),
}


@pytest.mark.parametrize("port", CASES)
def test_the_ranges_report_counts_the_sites_it_compares(port, tiny_model):
    rows = verify(tiny_model, VerifyOptions(port=f"{__name__}:{port}", quant="a8w8", groups=("quantization",))).rows
    ranges = [row for row in rows if "calibrated ranges" in row.check]
    start, fails = CASES[port]
    assert len(ranges) == 2 and all(row.check.startswith(start) for row in ranges), [row.check for row in ranges]
    assert all(row.failed == fails for row in ranges), ranges
    assert all(math.isnan(row.value) for row in ranges) == fails  # nothing compared: NaN, never a pass
    if fails:  # and no site named as the worst or the widest
        assert [row.check for row in ranges] == [f"{start} vs HF's [worst: ]", f"{start} vs HF's [widest: ]"]


class RangesNotExposed(StaticSchemePort):
    def observed_ranges(self):
        raise NotExposed("its calibration keeps no ranges")


class RangesRaise(StaticSchemePort):
    def observed_ranges(self):
        raise RuntimeError("calibration state lost")


def test_a_port_without_its_ranges_is_one_skip_row_and_one_that_raises_one_fail_row(tiny_model):
    def rows_of(port):
        options = VerifyOptions(port=f"{__name__}:{port}", quant="a8w8", groups=("quantization",))
        return [row for row in verify(tiny_model, options).rows if "calibrated ranges" in row.check]

    (skipped,) = rows_of("RangesNotExposed")
    assert (skipped.check, skipped.status, skipped.skipped) == (
        "its calibrated ranges vs HF's",
        "SKIP",
        "its calibration keeps no ranges",
    )
    (raised,) = rows_of("RangesRaise")
    assert (raised.check, raised.status) == ("its calibrated ranges vs HF's: the port raised", "FAIL")
    assert raised.detail.startswith("RuntimeError: calibration state lost")


class ClippingObservers(StaticSchemePort):
    """The same ranges, its recipe declaring observers that clip outliers by design."""

    limits = dataclasses.replace(
        StaticSchemePort.limits,
        schemes=SchemeLimits(
            StaticSchemePort.limits.schemes.names,
            tuple(dataclasses.replace(recipe, activation_clipping=True) for recipe in RECIPES),
        ),
    )


def test_a_recipe_whose_observers_clip_says_so_and_its_coverage_is_not_gated(tiny_model):
    options = VerifyOptions(port=f"{__name__}:ClippingObservers", quant="a8w8", groups=("quantization",))
    rows = [row for row in verify(tiny_model, options).rows if "calibrated ranges" in row.check]
    coverage = [row for row in rows if "[worst: " in row.check]
    assert len(coverage) == 1 and coverage[0].check.endswith(" (its observers clip by design)"), rows
    assert coverage[0].tolerance == math.inf and coverage[0].status == "INFO"  # measured, not gated
