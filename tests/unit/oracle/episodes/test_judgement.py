"""The judge of a port's logits against HF's: the float32 tolerance, HF's own disagreement as slack
just past it, and HF's second computation run only where it could matter; in a profile, the SQNR
against float64 under its gate. A NaN, an infinity or a wrong shape at any observed position is a
divergence named there, in both judges, and every observation is counted."""

from __future__ import annotations

import math

import pytest
import torch

from gemma4_static.oracle.episodes.judgement import SLACK_REACH, Observed, judge, judge_in_profile
from gemma4_static.oracle.results import tolerances


def _case(shift_in_tolerances: float, hf_disagreement_in_tolerances: float):
    """HF's logits over a 3-token history, the port's at position 2 shifted by a multiple of the
    tolerance, and HF's second computation differing from its first by another multiple there."""
    reference = torch.linspace(-4, 4, 3 * 16).view(3, 16)
    tolerance = tolerances.relative(torch.float32, reference)
    observed = Observed()
    ours = reference[2].clone()
    ours[0] += shift_in_tolerances * tolerance
    observed.add(0, 2, ours, "decode step 0")
    other = reference.clone()
    other[2, 0] += hf_disagreement_in_tolerances * tolerance
    calls = []

    def second(row: int) -> torch.Tensor:
        calls.append(row)
        return other

    return judge({0: reference}, observed, second), calls


def test_inside_the_tolerance_hf_is_not_asked_again():
    judgement, calls = _case(0.5, 0.0)
    assert not judgement.diverged and calls == []


def test_just_past_the_tolerance_hfs_own_disagreement_widens_the_bound():
    judgement, calls = _case(1.5, 0.75)
    assert not judgement.diverged and calls == [0] and judgement.hf_disagreement > 0
    judgement, _ = _case(1.5, 0.25)  # HF agrees with itself closer than the port's error: a divergence
    assert judgement.diverged and "row 0 position 2 (decode step 0)" in judgement.first


def test_far_past_the_tolerance_hf_is_not_run_a_second_time():
    judgement, calls = _case(2 * SLACK_REACH, 3 * SLACK_REACH)
    assert judgement.diverged and calls == []


REFERENCE = torch.linspace(-4, 4, 3 * 16, dtype=torch.float64).view(3, 16)


def _observed(position_two: torch.Tensor) -> Observed:
    """Row 0 right at positions 0 and 1 (returned in reverse order), ``position_two`` at position 2."""
    observed = Observed()
    observed.add(0, 1, REFERENCE[1].float(), "every position")
    observed.add(0, 0, REFERENCE[0].float(), "every position")
    observed.add(0, 2, position_two, "decode step 0")
    return observed


BROKEN = {
    "NaN": REFERENCE[2].float().clone().index_fill_(0, torch.tensor([3]), math.nan),
    "infinity": REFERENCE[2].float().clone().index_fill_(0, torch.tensor([3]), math.inf),
    "wrong shape": REFERENCE[2, :8].float(),
}


@pytest.mark.parametrize("broken", BROKEN)
def test_a_broken_position_diverges_under_both_judges(broken):
    for judgement in (
        judge({0: REFERENCE}, _observed(BROKEN[broken])),
        judge_in_profile({0: REFERENCE}, _observed(BROKEN[broken]), 20.0),
    ):
        assert judgement.diverged and judgement.first.startswith("row 0 position 2 (decode step 0)"), judgement
        assert judgement.compared == 3 and judgement.error == math.inf  # as far as it gets, whatever the tolerance


def test_the_right_logits_pass_both_judges_with_every_position_counted():
    right = _observed(REFERENCE[2].float())
    plain, profiled = judge({0: REFERENCE}, right), judge_in_profile({0: REFERENCE}, right, 20.0)
    assert not plain.diverged and plain.compared == 3 and plain.error < plain.tolerance
    assert not profiled.diverged and profiled.compared == 3 and profiled.tolerance == -20.0


def test_in_a_profile_the_gate_decides_and_the_worst_position_is_reported():
    noisy = REFERENCE[2].float() + 0.05 * torch.linspace(-1, 1, 16)  # about 36 dB against float64
    sqnr = 10 * math.log10(float((REFERENCE[2] ** 2).sum()) / float(((noisy.double() - REFERENCE[2]) ** 2).sum()))
    passed = judge_in_profile({0: REFERENCE}, _observed(noisy), sqnr - 1)
    assert not passed.diverged and passed.error == pytest.approx(-sqnr) and passed.tolerance == -(sqnr - 1)
    failed = judge_in_profile({0: REFERENCE}, _observed(noisy), sqnr + 1)
    assert failed.diverged and f"{sqnr:.1f} dB against float64 < gate {sqnr + 1:g} dB" in failed.first


def test_the_first_divergence_is_the_first_row_then_the_first_position():
    observed = Observed()
    for row in (1, 0):
        for position in (2, 1):
            observed.add(row, position, REFERENCE[position].float() + 1.0, f"chunk {position}")
    judgement = judge({0: REFERENCE, 1: REFERENCE}, observed)
    assert judgement.first.startswith("row 0 position 1 (chunk 1)") and judgement.compared == 4
