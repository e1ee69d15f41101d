"""The judge of a port's logits against HF's: the float32 tolerance, HF's own disagreement as slack
just past it, and HF's second computation run only where it could matter."""

from __future__ import annotations

import torch

from gemma4_static.oracle.episodes.judgement import SLACK_REACH, Observed, judge
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
