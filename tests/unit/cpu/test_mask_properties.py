"""Invariants of the static masks over generated configs, lengths, paddings and windows."""

from __future__ import annotations

import torch
from hypothesis import event, example, given
from hypothesis import strategies as st

from gemma4_static import (
    build_decode_bool_masks,
    build_decode_masks,
    build_prefill_bool_masks,
    build_prefill_masks,
    read_text_config,
)
from gemma4_static.cpu.checks import default_mask_value
from gemma4_static.cpu.rules import vision_block_ids
from tests.strategies import WINDOW_HUGE, WINDOW_ONE, text_configs, token_types, valid_masks

causal_configs = text_configs(bidirectional=st.just(None))
ONE_VALID_TOKEN = torch.tensor([[False, False, True, False]])
ALL_BUT_ONE_PADDED = torch.tensor([[True] + [False] * 7, [False] * 7 + [True], [True] * 8])


def _describe(config, valid: torch.Tensor) -> None:
    """Count what each example exercised (``--hypothesis-show-statistics``): the window against the
    length, and the padding layout."""
    window, length = read_text_config(config).sliding_window, valid.shape[1]
    event("window 1" if window == 1 else "window >= length" if window >= length else "1 < window < length")
    counts = valid.sum(dim=1)
    if bool((counts == length).all()):
        event("no padding")
    if bool((counts == 1).any()):
        event("a row with a single valid token")
    if bool(((counts > 1) & (counts < length)).any()):
        event("a padded row")


def edge_cases(test):
    """The layouts every mask property must see: window 1 and a window past any length, with a
    single valid token and with rows that are all padding but one token."""
    for config in (WINDOW_ONE, WINDOW_HUGE):
        for valid in (ONE_VALID_TOKEN, ALL_BUT_ONE_PADDED):
            test = example(config=config, valid=valid)(test)
    return test


def _grid(length: int) -> tuple[torch.Tensor, torch.Tensor]:
    positions = torch.arange(length)
    return positions[:, None], positions[None, :]


@given(causal_configs, valid_masks())
@edge_cases
def test_masks_are_causal(config, valid):
    _describe(config, valid)
    q, k = _grid(valid.shape[1])
    for mask in build_prefill_bool_masks(config, valid).values():
        assert not (mask & (k > q)).any()


@given(causal_configs, valid_masks())
@edge_cases
def test_sliding_mask_stays_inside_the_window(config, valid):
    _describe(config, valid)
    window = read_text_config(config).sliding_window
    q, k = _grid(valid.shape[1])
    masks = build_prefill_bool_masks(config, valid)
    assert not (masks["sliding_attention"] & (k <= q - window)).any()


@given(causal_configs, valid_masks())
@edge_cases
def test_sliding_is_a_subset_of_full(config, valid):
    _describe(config, valid)
    masks = build_prefill_bool_masks(config, valid)
    assert not (masks["sliding_attention"] & ~masks["full_attention"]).any()


@given(text_configs(), valid_masks())
@edge_cases
def test_padded_key_columns_are_fully_forbidden(config, valid):
    _describe(config, valid)
    for mask in build_prefill_bool_masks(config, valid).values():
        padded_columns = mask[:, 0].transpose(1, 2)[~valid]  # (num_padded, S): who sees each padded key
        assert not padded_columns.any()


@given(text_configs(), valid_masks())
@edge_cases
def test_every_valid_query_sees_itself(config, valid):
    _describe(config, valid)
    for mask in build_prefill_bool_masks(config, valid).values():
        diagonal = mask[:, 0].diagonal(dim1=1, dim2=2)
        assert torch.equal(diagonal, valid)
        assert mask[:, 0][valid].any(dim=-1).all()


@given(causal_configs, valid_masks(max_length=40))
@example(config=WINDOW_HUGE, valid=ONE_VALID_TOKEN)
def test_window_at_least_length_makes_sliding_equal_full(config, valid):
    if read_text_config(config).sliding_window < valid.shape[1]:
        config.sliding_window = valid.shape[1] + 1
    masks = build_prefill_bool_masks(config, valid)
    assert torch.equal(masks["sliding_attention"], masks["full_attention"])


@given(text_configs(), valid_masks(max_batch=4))
@edge_cases
def test_batch_rows_are_independent(config, valid):
    _describe(config, valid)
    batched = build_prefill_bool_masks(config, valid)
    for row in range(valid.shape[0]):
        alone = build_prefill_bool_masks(config, valid[row : row + 1])
        for name, mask in batched.items():
            assert torch.equal(mask[row : row + 1], alone[name])


@given(causal_configs, valid_masks(), st.data())
def test_decode_row_equals_prefill_row(config, valid, data):
    length = valid.shape[1]
    position = data.draw(st.integers(0, length - 1))
    valid = valid.clone()
    valid[:, position] = True
    valid[:, position + 1 :] = False  # slots after the new token are not written yet
    prefill = build_prefill_bool_masks(config, valid)
    decode = build_decode_bool_masks(config, valid, position)
    for name, mask in decode.items():
        assert mask.shape == (valid.shape[0], 1, 1, length)
        assert torch.equal(mask[:, 0, 0], prefill[name][:, 0, position])


@given(causal_configs, valid_masks(), st.data())
def test_decode_rows_at_different_positions(config, valid, data):
    batch, length = valid.shape
    positions = torch.tensor([data.draw(st.integers(0, length - 1)) for _ in range(batch)])
    valid = valid.clone()
    valid[torch.arange(batch), positions] = True
    decode = build_decode_bool_masks(config, valid, positions)
    prefill = build_prefill_bool_masks(config, valid)
    for name, mask in decode.items():
        for row in range(batch):
            assert torch.equal(mask[row, 0, 0], prefill[name][row, 0, positions[row]])


@given(
    text_configs(),
    valid_masks(max_length=24),
    st.sampled_from([torch.float32, torch.bfloat16, torch.float16]),
    st.sampled_from([None, -1e4, -30000.0, float("-inf")]),
)
def test_additive_and_boolean_forms_agree(config, valid, dtype, mask_value):
    boolean = build_prefill_bool_masks(config, valid)
    additive = build_prefill_masks(config, valid, dtype=dtype, mask_value=mask_value)
    fill = default_mask_value(dtype) if mask_value is None else mask_value
    for name, mask in additive.items():
        assert mask.dtype == dtype
        assert torch.equal(mask == 0, boolean[name])
        assert (mask[~boolean[name]] == torch.tensor(fill, dtype=dtype)).all()


@given(causal_configs, valid_masks(max_length=24), st.sampled_from([torch.float32, torch.float16]))
def test_decode_additive_matches_boolean(config, valid, dtype):
    valid = valid.clone()
    valid[:, -1] = True
    position = valid.shape[1] - 1
    boolean = build_decode_bool_masks(config, valid, position)
    for name, mask in build_decode_masks(config, valid, position, dtype=dtype).items():
        assert torch.equal(mask == 0, boolean[name])


@given(text_configs(bidirectional=st.just("vision")), valid_masks(max_length=32), st.data())
def test_vision_blocks_are_bidirectional_inside_the_window(config, valid, data):
    types = data.draw(token_types(tuple(valid.shape)))
    masks = build_prefill_bool_masks(config, valid, mm_token_type_ids=types)
    plain = build_prefill_bool_masks(config, valid)
    assert torch.equal(masks["full_attention"], plain["full_attention"])  # full layers stay causal
    event("vision tokens present" if bool((types > 0).any()) else "text only")
    window = read_text_config(config).sliding_window
    sliding = masks["sliding_attention"][:, 0]
    q, k = _grid(valid.shape[1])
    assert not (sliding & (k <= q - window)).any()
    assert not (sliding & ~plain["sliding_attention"][:, 0] & (types[:, :, None] == 0)).any()  # text rows unchanged
    assert (sliding | ~plain["sliding_attention"][:, 0]).all()  # only adds to the causal pattern
    blocks = vision_block_ids(types)
    same_block = (blocks[:, :, None] == blocks[:, None, :]) & (blocks[:, :, None] >= 0)
    expected_open = same_block & (k > q - window) & valid[:, None, :]
    assert sliding[expected_open].all()  # a vision token sees its whole block inside the window
