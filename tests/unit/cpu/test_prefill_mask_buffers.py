"""The kept prefill mask buffers: what a call rewrites, what it refuses, what the runtime gets.

Their values are checked against HF call after call in ``test_masks_differential.py``; here the
premise of their speed (a call rewrites only the columns whose padding changed, over the rows that
see them) and their bad input.
"""

from __future__ import annotations

import pytest
import torch

from gemma4_static import PrefillMaskBuffers, StaticGemma4Runtime, build_prefill_masks
from gemma4_static.cpu.prefill_masks import COLUMN_BLOCK, MAX_CHANGED_RUNS
from gemma4_static.oracle.references.models import e2b_geometry_config

CONFIG = e2b_geometry_config()  # sliding window 512
LENGTH = 1024
MARK = 7.0  # a value no additive mask holds


def _right_padded(valid_length: int) -> torch.Tensor:
    return (torch.arange(LENGTH) < valid_length)[None]


def _marked(buffers: PrefillMaskBuffers, first: torch.Tensor) -> dict[str, torch.Tensor]:
    """The buffers after a call on ``first`` with every entry overwritten by ``MARK``: what the next
    call leaves at ``MARK`` it did not write."""
    masks = buffers(first)
    for mask in masks.values():
        mask.fill_(MARK)
    return masks


def test_a_call_rewrites_only_the_changed_columns_and_the_rows_that_see_them():
    buffers = PrefillMaskBuffers(CONFIG, LENGTH)
    _marked(buffers, _right_padded(600))
    masks = buffers(_right_padded(700))  # slots 600..699 became valid
    written = {name: mask[0, 0] != MARK for name, mask in masks.items()}
    window = CONFIG.sliding_window
    for column in range(600, 700):  # every cell that changed: the rows that see the column
        assert written["full_attention"][column:, column].all()
        assert written["sliding_attention"][column : column + window, column].all()
    top = 600 // COLUMN_BLOCK * COLUMN_BLOCK  # the first row seeing a column of the first block
    below = (699 // COLUMN_BLOCK + 1) * COLUMN_BLOCK + window - 1  # past the last block's window
    for name, cells in written.items():
        assert not cells[:, :600].any() and not cells[:, 700:].any(), name
        assert not cells[:top].any(), name
    assert not written["sliding_attention"][below:].any()


def test_many_changed_runs_take_one_full_pass_with_the_same_result():
    holes = _right_padded(LENGTH).clone()
    holes[0, 1 : 4 * MAX_CHANGED_RUNS : 2] = False  # 2 * MAX_CHANGED_RUNS runs in one row
    buffers = PrefillMaskBuffers(CONFIG, LENGTH)
    _marked(buffers, _right_padded(LENGTH))
    masks = buffers(holes)
    expected = build_prefill_masks(CONFIG, holes)
    for name, mask in masks.items():
        assert torch.equal(mask, expected[name]), name  # every entry rewritten, none left at MARK


def test_an_unchanged_mask_is_not_rewritten():
    buffers = PrefillMaskBuffers(CONFIG, LENGTH)
    masks = _marked(buffers, _right_padded(300))
    again = buffers(_right_padded(300))
    assert all(bool((mask == MARK).all()) for mask in again.values())
    assert all(again[name].data_ptr() == masks[name].data_ptr() for name in masks)


def test_the_runtime_prefills_through_its_kept_buffers(tiny_model):
    """Two prompts in a row: the second prefill's masks are the first's buffers, rewritten."""
    runtime = StaticGemma4Runtime(tiny_model, max_seq=16, batch_size=1)
    runtime.prefill(torch.tensor([[2, 10, 11, 12]]))
    first = {name: mask.data_ptr() for name, mask in runtime.stack.prefill_masks.buffers.items()}
    runtime.prefill(torch.tensor([[2, 10, 11, 12, 13, 14, 15]]))
    assert first and {name: mask.data_ptr() for name, mask in runtime.stack.prefill_masks.buffers.items()} == first
    assert runtime.stack.prefill_masks.valid.sum() == 7


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"max_seq": 0}, ValueError, r"max_seq must be a positive int, got 0"),
        ({"max_seq": 16, "batch_size": 0}, ValueError, r"batch_size must be a positive int, got 0"),
        (
            {"max_seq": 16, "dtype": torch.int32},
            TypeError,
            r"dtype must be a floating torch.dtype \(e.g. torch.float32\), got torch.int32",
        ),
    ],
)
def test_bad_construction(kwargs, error, message):
    with pytest.raises(error, match=message):
        PrefillMaskBuffers(CONFIG, **kwargs)


@pytest.mark.parametrize(
    ("attention_mask", "error", "message"),
    [
        (
            torch.ones(1, 8, dtype=torch.bool),
            ValueError,
            r"attention_mask must have shape \(batch_size, max_seq\) = \(2, 16\), got \(1, 8\)",
        ),
        (torch.ones(2, 16), TypeError, r"attention_mask must be boolean \(or integer 0/1\)"),
    ],
)
def test_bad_attention_mask(attention_mask, error, message):
    with pytest.raises(error, match=message):
        PrefillMaskBuffers(CONFIG, 16, batch_size=2)(attention_mask)
