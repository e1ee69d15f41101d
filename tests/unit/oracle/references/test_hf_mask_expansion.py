"""HF's masks as the judge reads them: a mask HF leaves ``None`` expanded to what its attention then
does (upper-left causal, or every key), a float mask allowed exactly at its zeros; always a boolean
``(B, 1, Q, K)`` pattern, so a comparison with a port's mask counts entries, never values."""

from __future__ import annotations

import pytest
import torch

from gemma4_static.oracle.references.hf import expand_hf_mask


@pytest.mark.parametrize(
    ("q_len", "causal", "rows"),
    [
        (3, True, [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0]]),  # upper-left: query i sees keys 0..i
        (3, False, [[1, 1, 1, 1]] * 3),  # bidirectional attention: every key
        (1, True, [[1, 1, 1, 1]]),  # one query (decode): HF runs without is_causal, every key
    ],
    ids=["causal", "bidirectional", "one-query"],
)
def test_a_mask_hf_leaves_none_is_what_its_attention_does_without_one(q_len, causal, rows):
    pattern = expand_hf_mask(None, 2, q_len, 4, causal=causal)
    assert pattern.dtype == torch.bool and pattern.shape == (2, 1, q_len, 4)
    assert torch.equal(pattern, torch.tensor(rows, dtype=torch.bool).expand(2, 1, q_len, 4))


def test_a_float_mask_allows_exactly_its_zeros_and_a_bool_mask_is_kept():
    additive = torch.tensor([[[[0.0, -1e9], [0.0, -0.5]]]])  # any nonzero is masked, however small
    allowed = expand_hf_mask(additive, 3, 2, 2)
    assert allowed.dtype == torch.bool and allowed.shape == (3, 1, 2, 2)
    assert torch.equal(allowed[2, 0], torch.tensor([[True, False], [True, False]]))
    boolean = torch.tensor([[[[True, False]]]])
    assert torch.equal(expand_hf_mask(boolean, 2, 1, 2), boolean.expand(2, 1, 1, 2))
