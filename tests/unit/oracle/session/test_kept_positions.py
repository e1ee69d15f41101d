"""HF's sample logits at a real vocabulary: kept at a bounded number of positions (each row's last
and evenly spaced ones), read back only where kept, and the layers group comparing exactly those,
naming how many of how many. The embedded models keep every position, so the budget is shrunk here
to take the real-size path on the tiny model."""

from __future__ import annotations

import pytest
import torch

from gemma4_static.oracle.flow import verify
from gemma4_static.oracle.options import VerifyOptions
from gemma4_static.oracle.references.hf import hf_last_logits, hf_prefill
from gemma4_static.oracle.references.samples import text_prompt
from gemma4_static.oracle.session import session as session_module
from gemma4_static.oracle.session.session import LOGITS_BUDGET, kept_positions
from gemma4_static.ports.static import _over_positions

E2B_VOCAB = 262_144


def test_every_position_is_kept_within_the_budget(tiny_model):
    prompt = text_prompt(tiny_model.config, [7, 12])
    assert kept_positions(prompt, tiny_model.config.get_text_config().vocab_size) is None


@pytest.mark.parametrize("lengths", [[515, 515], [515, 300], [1027], [40, 515, 2]])
def test_at_a_real_vocabulary_each_rows_last_and_spread_positions_are_kept(tiny_model, lengths):
    prompt = text_prompt(tiny_model.config, lengths)
    kept = kept_positions(prompt, E2B_VOCAB)
    rows, length = prompt.input_ids.shape
    assert kept is not None and kept.dtype == torch.long
    assert torch.equal(kept, kept.unique())  # sorted, no repeat
    assert set(prompt.last_index.tolist()) <= set(kept.tolist())
    assert {0, length - 1} <= set(kept.tolist()) and int(kept.max()) < length
    within = LOGITS_BUDGET // (rows * E2B_VOCAB)
    assert 2 < len(kept) <= max(within, 2 + rows)  # bounded, yet more than the ends


def test_kept_logits_are_read_where_kept_and_refused_elsewhere(tiny_model):
    prompt = text_prompt(tiny_model.config, [9, 12])
    whole = hf_prefill(tiny_model, prompt)
    positions = torch.tensor([0, 5, 8, 11])
    kept = hf_prefill(tiny_model, prompt, positions)
    assert kept.logits.shape[1] == 4
    rows, at = torch.tensor([0, 1, 1, 0]), torch.tensor([8, 11, 0, 5])
    # float32: the LM head over 4 kept rows instead of 21 may block its GEMM otherwise; 1e-5 is about
    # three ulps of float32 at the tiny model's largest logits (|x| < 27: ulp 3.8e-6 in [16, 32));
    # measured 0.0 on AVX-512. A logit of another position differs by ~1.
    torch.testing.assert_close(kept.logits_at(rows, at), whole.logits_at(rows, at), rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match=r"positions \[6\] were not kept; HF's logits are kept at \[0, 5, 8, 11\]"):
        kept.logits_at(torch.tensor([0, 1]), torch.tensor([5, 6]))
    last = hf_last_logits(tiny_model, prompt)
    torch.testing.assert_close(last, whole.logits_at(torch.arange(2), prompt.last_index), rtol=0, atol=1e-5)


def test_the_heads_chunks_cover_every_position(tiny_model):
    """The port's logits at every position through the LM head 64 positions at a time: the head over
    the whole prompt, for lengths that end inside, on and past a chunk."""
    head = torch.nn.Linear(16, 24, dtype=torch.float64)
    for length in (1, 63, 64, 65, 150):
        hidden = torch.randn(2, length, 16, dtype=torch.float64)
        with torch.no_grad():
            # the same 16-term float64 dot products, the kernel's blocking may order them otherwise:
            # within 1e-12 of values about 4 (16 x 2^-53 x 4 ~ 1e-14); a chunk left unwritten is off by ~1
            torch.testing.assert_close(_over_positions(head, hidden), head(hidden), rtol=0, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_layers_group_compares_the_kept_positions_and_names_them(tiny_model, monkeypatch, dtype):
    """With the budget below the sample prompt's logits, the layers group's every-position rows
    become "N of M valid positions" with N < M, compared (PASS), and each row's last is among them."""
    vocab = tiny_model.config.get_text_config().vocab_size
    monkeypatch.setattr(session_module, "LOGITS_BUDGET", 2 * 6 * vocab)  # six positions of two rows
    result = verify.verify(tiny_model, VerifyOptions(dtype=dtype, groups=("layers",)))
    named = [row for row in result.rows if " valid positions" in row.check and row.stage == "prefill logits"]
    assert named, [row.check for row in result.rows]
    for row in named:
        compared, total = (int(word) for word in row.check.split(" valid positions")[0].split(" of "))
        assert 2 <= compared < total and row.status in ("PASS", "INFO"), (row.check, row.status)
    assert any(row.status == "PASS" for row in named)
    assert result.verdict.counts["FAIL"] == 0
