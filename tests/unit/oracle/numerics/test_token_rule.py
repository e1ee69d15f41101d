"""The token rule (``oracle/metrics.py``): a top-1, top-5 or greedy-token check counts a row as a
disagreement only where the reference's gap exceeds the profile's bound; tied rows are reported.

Shown here: a correct run whose errors stay within half the bound never disagrees on a decided row
(any logits, any errors: the rule holds on every machine whose error is bounded), while an error
that moves a decided gap past zero is always counted (the rule lets no real flip through), also one
of a single bf16 ulp where the gap is smaller than that ulp's worth of bound."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from gemma4_static.oracle.numerics.gates import GATED_STAGES, GATES, QUANT_GATES
from gemma4_static.oracle.numerics.metrics import compare_greedy, gaps, margin_shift, top_k_check, ulp
from gemma4_static.oracle.numerics.parity_numerics import decision_rows, greedy_rows, metric_rows, token_rows


def test_ulp_and_gaps_on_known_values():
    assert ulp(torch.bfloat16, torch.tensor([29.3, 16.0, 15.9, -1.0])).tolist() == [0.125, 0.125, 2**-4, 2**-7]
    assert ulp(torch.float16, torch.tensor([29.3])).item() == 2**-6
    logits = torch.tensor([[1.0, 5.0, 4.5, 0.0, 2.0, 3.0, -1.0]])
    assert gaps(logits, 1).item() == 0.5 and gaps(logits, 5).item() == 1.0


def test_margin_shift_is_the_spread_of_errors_on_the_top_logits():
    reference = torch.tensor([[10.0, 9.0, 8.0, 7.0, 6.0, 5.0, 4.0, 0.0]])
    shifted = reference + 3.0  # a common offset moves no gap
    assert margin_shift(shifted, reference).item() == 0.0
    moved = reference.clone()
    moved[0, 1] += 0.25
    moved[0, 7] += 100.0  # outside the top six: not a decision the rule makes
    assert margin_shift(moved, reference).item() == 0.25
    assert margin_shift(torch.full_like(reference, math.nan), reference).item() == math.inf


def test_a_flip_on_a_decided_row_counts_and_a_tied_row_is_reported():
    reference = torch.tensor([[3.0, 1.0, 0.0], [1.0, 0.99, 0.0], [2.0, 0.0, 1.0]])
    ours = torch.tensor([[1.0, 3.0, 0.0], [0.99, 1.0, 0.0], [2.0, 0.0, 1.0]])  # rows 0 and 1 flipped
    check = top_k_check(ours, reference, 1, bound=0.5)
    assert (check.missed, check.decided, check.tied) == (1, 2, (1,))
    nan_row = top_k_check(torch.full((1, 3), math.nan), reference[:1], 1, bound=0.5)
    assert (nan_row.missed, nan_row.decided) == (1, 1)


def test_top5_judges_each_decided_member():
    reference = torch.tensor([[10.0, 9.0, 8.0, 7.0, 6.0, 5.9, 0.0]])  # 5th and 6th within the bound
    ours = torch.tensor([[10.0, 9.0, 8.0, 7.0, 5.9, 6.0, 0.0]])
    assert top_k_check(ours, reference, 5, bound=0.5) == top_k_check(reference, reference, 5, bound=0.5)
    assert top_k_check(ours, reference, 5, bound=0.5).decided == 4
    worse = torch.tensor([[10.0, 9.0, 8.0, 0.0, 6.0, 5.9, 7.5]])  # a decided member (7.0) pushed out
    assert top_k_check(worse, reference, 5, bound=0.5).missed == 1


@given(
    vocab=st.integers(2, 40),
    rows=st.integers(1, 6),
    seed=st.integers(0, 2**16),
    bound=st.floats(1e-3, 2.0),
    scale=st.floats(0.0, 1.0),
)
def test_errors_within_half_the_bound_never_disagree_on_a_decided_row(vocab, rows, seed, bound, scale):
    """Soundness: every logit within ``bound / 2`` of the reference (so no gap moves by ``bound``)
    can reorder only tied tokens. Ties between equal values included (the lower index wins)."""
    generator = torch.Generator().manual_seed(seed)
    reference = torch.randn(rows, vocab, generator=generator, dtype=torch.float64).round(decimals=1)
    error = (torch.rand(rows, vocab, generator=generator, dtype=torch.float64) * 2 - 1) * scale * bound / 2
    ours = reference + error
    assert float(margin_shift(ours, reference).max()) <= bound + 1e-12
    for k in (1, min(5, vocab - 1)):
        assert top_k_check(ours, reference, k, bound).missed == 0


@given(gap=st.floats(0.01, 10.0), bound=st.floats(0.0, 9.99))
def test_no_flip_of_a_decided_row_goes_uncounted(gap, bound):
    """An error that carries the runner-up past the leader is a disagreement whenever the gap it
    crossed is decided, whatever the bound: the rule never excuses a flip by the run's own error."""
    reference = torch.tensor([[gap, 0.0, -20.0]], dtype=torch.float64)
    ours = torch.tensor([[0.0, gap, -20.0]], dtype=torch.float64)
    check = top_k_check(ours, reference, 1, bound)
    assert check.missed == (1 if gap > bound else 0)
    assert check.decided + len(check.tied) == 1


def test_a_one_ulp_bf16_error_is_a_disagreement_where_the_gap_is_decided():
    """A bug of one bf16 ulp (0.125 at logits in [16, 32)) that swaps two logits 0.1 apart: counted
    when the profile's bound leaves that gap decided, reported as tied when it does not."""
    reference = torch.tensor([[20.1, 20.0, 3.0]], dtype=torch.float64)
    buggy = reference + torch.tensor([[0.0, 0.125, 0.0]], dtype=torch.float64)
    one_ulp = float(ulp(torch.bfloat16, torch.tensor(20.0)))
    assert top_k_check(buggy, reference, 1, bound=0.5 * one_ulp).missed == 1
    tied = top_k_check(buggy, reference, 1, bound=GATES[torch.bfloat16].token_bound(reference))
    assert (tied.missed, tied.tied) == (0, (0,))


def test_greedy_divergence_is_judged_at_the_first_differing_step():
    reference = torch.tensor([[5, 6, 7], [5, 6, 7]])
    ours = torch.tensor([[5, 9, 9], [5, 6, 8]])
    logits = torch.zeros(2, 3, 10, dtype=torch.float64)
    logits[0, 1, 6], logits[0, 1, 9] = 3.0, 1.0  # row 0 leaves at step 1, gap 2: decided
    logits[1, 2, 7], logits[1, 2, 8] = 1.05, 1.0  # row 1 leaves at step 2, gap 0.05: tied
    result = compare_greedy(ours, reference, logits, bound=0.5)
    assert result.matched_prefix == 1
    assert result.decided == ((0, 1, 2.0),) and [(row, step) for row, step, _ in result.tied] == [(1, 2)]
    rows = greedy_rows("generation", "2 rows", ours, reference, logits, 0.5)
    assert [(row.metric, row.value, row.status) for row in rows] == [
        ("decided divergences", 1, "FAIL"),
        ("tied divergences", 1, "INFO"),
        ("matched prefix", 1, "INFO"),
    ]
    assert "row 1 step 2 (0.05)" in rows[1].check
    # the first divergence names the tokens: the port's, the reference's, and the one fed before
    assert "[first: row 0 step 1, gap 2: token 9 where the reference's is 6, after 5]" in rows[0].check


def test_token_rows_fail_beyond_the_premise_and_name_the_tied_rows():
    gate = GATES[torch.float16]
    reference = torch.tensor([[20.0, 19.9, 0, 0, 0, 0, 0], [20.0, 10.0, 0, 0, 0, 0, 0]], dtype=torch.float64)
    within = reference.clone()
    within[0, 1] += 0.05
    rows = token_rows("decode steps", "2 steps", within, reference, reference, gate, lambda row: f"step {row}")
    assert not any(row.failed for row in rows)
    tied = next(row for row in rows if row.metric == "tied at this precision")
    assert tied.value == 1 and "closest step 0 (0.1)" in tied.check
    beyond = reference.clone()
    beyond[1, 1] += 9.0
    rows = token_rows("decode steps", "2 steps", beyond, reference, reference, gate, str)
    failed = {row.metric for row in rows if row.failed}
    assert failed >= {"margin shift (ulps)"}
    flipped = reference[:, [1, 0, 2, 3, 4, 5, 6]]
    rows = decision_rows("decode steps", "2 steps", flipped, reference, 0.5, "0.5", str)
    assert [(row.metric, row.value) for row in rows] == [("top-1 disagreements", 1), ("tied at this precision", 1)]


def test_mismatched_shapes_are_a_clear_error():
    with pytest.raises(ValueError, match=r"logits must be two \(N, vocab\) tensors"):
        top_k_check(torch.zeros(2, 3), torch.zeros(3, 3), 1, 0.5)
    with pytest.raises(ValueError, match=r"k must be in \[1, vocab\) = \[1, 3\), got 5"):
        top_k_check(torch.zeros(2, 3), torch.zeros(2, 3), 5, 0.5)
    with pytest.raises(ValueError, match="need logits of shape"):
        compare_greedy(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(2, 2, 5), 0.5)


@pytest.mark.parametrize(
    ("ours_noise", "hf_noise", "fails"),
    [(0.1, 0.01, True), (0.01, 0.1, False), (0.0, 0.0, False), (0.012, 0.01, False)],
    ids=["ours worse by 20 dB", "ours better", "both exact", "ours worse by 1.6 dB"],
)
def test_an_integer_profile_is_gated_on_how_far_it_falls_below_hf_in_the_same_scheme(ours_noise, hf_noise, fails):
    """The deficit row is HF's SQNR minus ours (which side is worse matters: ours better is a negative
    deficit), gated at the scheme's ``hf_deficit_db`` (3 dB); both exact is no deficit."""
    gate = dataclasses.replace(GATES[torch.bfloat16], hf_deficit_db=3.0)
    reference = torch.linspace(-1, 1, 64, dtype=torch.float64)
    wobble = torch.cos(torch.arange(64, dtype=torch.float64))
    ours, hf = reference + ours_noise * wobble, reference + hf_noise * wobble
    (deficit,) = [
        row for row in metric_rows("s", "c", ours, hf, reference, gate) if row.metric == "SQNR below HF's (dB)"
    ]
    expected = 0.0 if ours_noise == hf_noise == 0 else 20 * math.log10(ours_noise / hf_noise)
    assert deficit.value == pytest.approx(expected) and deficit.tolerance == 3.0 and deficit.failed == fails
    assert [row.metric for row in metric_rows("s", "c", ours, hf, reference, GATES[torch.bfloat16])] == [
        "SQNR dB", "cosine", "max abs error", "PEIR"
    ]  # fmt: skip


def test_each_gated_stage_of_an_integer_profile_is_judged_by_its_own_gate():
    """a16w8 gates the PLE at 31 dB and the decoder layers at 17: one output 20 dB off fails the
    first and passes the second; a stage without its own gate takes the profile's floor (the lowest)."""
    gate = QUANT_GATES["a16w8"]
    assert [gate.sqnr_gate(stage) for stage in GATED_STAGES] == [38, 31, 32, 17, 12, 10, 9, 11]
    # each scheme's deficit bound against HF in the same scheme: its worst measured deficit plus 3 dB
    assert {name: QUANT_GATES[name].hf_deficit_db for name in ("a16w8", "a8w8", "a16w4")} == {
        "a16w8": 3.0, "a8w8": 6.0, "a16w4": 3.0
    }  # fmt: skip
    # each scheme's token-rule bound, in logits at every row (twice its worst measured margin shift)
    assert {name: QUANT_GATES[name].margin for name in ("a16w8", "a8w8", "a16w4")} == {
        "a16w8": 7.0, "a8w8": 17.5, "a16w4": 60.5
    }  # fmt: skip
    assert torch.equal(
        gate.token_bound(torch.tensor([[1e4, 0.0], [0.5, 0.25]])), torch.tensor([7.0, 7.0], dtype=torch.float64)
    )
    assert gate.sqnr_gate("fusion") == gate.sqnr_db == 9
    assert gate.cosine_gate("fusion") == gate.cosine == pytest.approx(1 - 10 ** (-9 / 10) / 2)  # the floor's cosine
    reference = torch.linspace(-1, 1, 64, dtype=torch.float64)
    wobble = torch.cos(torch.arange(64, dtype=torch.float64))
    ours = reference + wobble * float(reference.norm() / wobble.norm()) * 10 ** (-20 / 20)  # SQNR 20 dB
    for stage, fails in (("PLE", True), ("decoder layers", False)):
        sqnr, cosine = metric_rows(stage, "c", ours, ours, reference, gate)[:2]
        assert sqnr.value == pytest.approx(20.0) and sqnr.failed == fails
        assert sqnr.tolerance == gate.sqnr_gate(stage)
        assert cosine.tolerance == pytest.approx(1 - 10 ** (-gate.sqnr_gate(stage) / 10) / 2)
        assert cosine.failed == fails


def test_the_margin_shift_row_carries_hfs_own_shift():
    gate = GATES[torch.float16]
    reference = torch.tensor([[20.0, 19.0, 0, 0, 0, 0, 0]], dtype=torch.float64)
    ours, hf = reference.clone(), reference.clone()
    hf[0, 1] += 2**-6 * 4  # four float16 ulps at 20
    (shift, *_) = token_rows("decode steps", "1 step", ours, hf, reference, gate, str)
    assert (shift.metric, shift.value, shift.hf, shift.tolerance) == ("margin shift (ulps)", 0.0, 4.0, gate.margin)
