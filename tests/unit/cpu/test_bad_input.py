"""Bad input to the mask and RoPE builders fails early with a message naming the argument."""

from __future__ import annotations

import pytest
import torch

from gemma4_static import (
    RopeTables,
    build_decode_masks,
    build_prefill_masks,
    build_rope,
)
from gemma4_static.oracle.references.models import e2b_geometry_config, tiny_config
from tests.strategies import small_text_config

CONFIG = e2b_geometry_config()
VALID = torch.ones(2, 8, dtype=torch.bool)


@pytest.mark.parametrize(
    ("attention_mask", "error", "message"),
    [
        (
            torch.ones(2, 8),
            TypeError,
            r"attention_mask must be boolean \(or integer 0/1\), got dtype torch.float32",
        ),
        (torch.full((2, 8), 2), ValueError, r"attention_mask must hold only 0 and 1, got values \[2\]"),
        (
            torch.ones(8, dtype=torch.bool),
            ValueError,
            r"attention_mask must have shape \(B, S\), got shape \(8,\)",
        ),
        (torch.ones(1, 2, 8, dtype=torch.bool), ValueError, r"attention_mask must have shape \(B, S\)"),
        (
            torch.ones(2, 0, dtype=torch.bool),
            ValueError,
            r"attention_mask must not be empty, got shape \(2, 0\)",
        ),
        (torch.ones(0, 4, dtype=torch.bool), ValueError, r"attention_mask must not be empty"),
        ([[1, 1]], TypeError, r"attention_mask must be a torch.Tensor of shape \(B, S\), got list"),
    ],
)
def test_bad_attention_mask(attention_mask, error, message):
    with pytest.raises(error, match=message):
        build_prefill_masks(CONFIG, attention_mask)
    if attention_mask is not None and not isinstance(attention_mask, list) and attention_mask.dim() == 2:
        with pytest.raises(error, match=message):
            build_decode_masks(CONFIG, attention_mask, 0)


def test_integer_zero_one_mask_is_accepted():
    as_int = build_prefill_masks(CONFIG, VALID.long())
    as_bool = build_prefill_masks(CONFIG, VALID)
    for name in as_bool:
        assert torch.equal(as_int[name], as_bool[name])


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool, "float32", None])
def test_non_floating_dtype(dtype):
    for call in (
        lambda: build_prefill_masks(CONFIG, VALID, dtype=dtype),
        lambda: build_decode_masks(CONFIG, VALID, 3, dtype=dtype),
        lambda: build_rope(CONFIG, torch.arange(4), dtype=dtype),
    ):
        with pytest.raises(TypeError, match=r"dtype must be a floating torch.dtype"):
            call()


@pytest.mark.parametrize(
    ("mask_value", "dtype", "error", "message"),
    [
        (0.0, torch.float32, ValueError, r"mask_value must be negative .* got 0.0"),
        (5, torch.float32, ValueError, r"mask_value must be negative"),
        (-1e9, torch.float16, ValueError, r"mask_value=-1000000000.0 is below the range of torch.float16"),
        ("min", torch.float32, TypeError, r"mask_value must be a number or None, got str"),
    ],
)
def test_bad_mask_value(mask_value, dtype, error, message):
    with pytest.raises(error, match=message):
        build_prefill_masks(CONFIG, VALID, dtype=dtype, mask_value=mask_value)
    with pytest.raises(error, match=message):
        build_decode_masks(CONFIG, VALID, 7, dtype=dtype, mask_value=mask_value)


@pytest.mark.parametrize(
    ("position", "error", "message"),
    [
        (8, ValueError, r"position must lie in \[0, max_seq\) = \[0, 8\), got \[8, 8\]"),
        (-1, ValueError, r"position must lie in \[0, max_seq\) = \[0, 8\), got \[-1, -1\]"),
        (
            torch.tensor([1, 2, 3]),
            ValueError,
            r"position must be an int or a tensor of shape \(B,\) = \(2,\), got shape \(3,\)",
        ),
        (torch.tensor([1.0, 2.0]), TypeError, r"position must be an int or an integer tensor"),
        (2.0, TypeError, r"position must be an int or an integer tensor"),
        (True, TypeError, r"position must be an int or an integer tensor"),
    ],
)
def test_bad_decode_position(position, error, message):
    with pytest.raises(error, match=message):
        build_decode_masks(CONFIG, VALID, position)


def test_decode_slot_of_new_token_must_be_valid():
    valid = VALID.clone()
    valid[1, 5] = False
    with pytest.raises(ValueError, match=r"rows \[1\] have attention_mask\[row, position\] False"):
        build_decode_masks(CONFIG, valid, 5)


def test_decode_is_undefined_for_bidirectional_all():
    config = small_text_config(
        sliding_window=8, layer_types=["sliding_attention", "full_attention"], bidirectional="all"
    )
    build_prefill_masks(config, VALID)  # prefill is defined
    with pytest.raises(ValueError, match=r"use_bidirectional_attention='all' describes an encoder"):
        build_decode_masks(config, VALID, 3)


@pytest.mark.parametrize(
    ("types", "error", "message"),
    [
        (
            torch.zeros(2, 7, dtype=torch.long),
            ValueError,
            r"mm_token_type_ids must have the attention_mask's shape \(2, 8\), got \(2, 7\)",
        ),
        (
            torch.zeros(3, 8, dtype=torch.long),
            ValueError,
            r"mm_token_type_ids must have the attention_mask's shape",
        ),
        (torch.zeros(2, 8), TypeError, r"mm_token_type_ids must hold integers, got dtype torch.float32"),
        ([[0] * 8] * 2, TypeError, r"mm_token_type_ids must be a torch.Tensor, got list"),
    ],
)
def test_bad_token_types(types, error, message):
    with pytest.raises(error, match=message):
        build_prefill_masks(tiny_config(), VALID, mm_token_type_ids=types)


@pytest.mark.parametrize(
    ("position_ids", "error", "message"),
    [
        (torch.arange(4.0), TypeError, r"position_ids must hold integers, got dtype torch.float32"),
        (torch.tensor([0, -1, 2]), ValueError, r"position_ids must be non-negative, got min -1"),
        (
            torch.zeros(1, 2, 3, dtype=torch.long),
            ValueError,
            r"position_ids must have non-empty shape \(B, S\)",
        ),
        (torch.zeros(1, 0, dtype=torch.long), ValueError, r"position_ids must have non-empty shape \(B, S\)"),
        ([0, 1], TypeError, r"position_ids must be an integer torch.Tensor"),
    ],
)
def test_bad_position_ids(position_ids, error, message):
    with pytest.raises(error, match=message):
        build_rope(CONFIG, position_ids)


def test_rope_table_rejects_positions_past_its_length():
    table = RopeTables(CONFIG, 16)
    with pytest.raises(ValueError, match=r"position_ids reach 16, beyond this table's 16 positions"):
        table(torch.arange(17))


@pytest.mark.parametrize("max_seq", [0, -3, 2.5, True])
def test_rope_table_rejects_bad_max_seq(max_seq):
    with pytest.raises(ValueError, match=r"max_seq must be a positive int"):
        RopeTables(CONFIG, max_seq)


def test_rope_beyond_the_models_context_is_refused():
    limit = CONFIG.max_position_embeddings
    with pytest.raises(ValueError, match=rf"max_seq={limit + 1} exceeds the model's max_position_embeddings={limit}"):
        RopeTables(CONFIG, limit + 1)
    with pytest.raises(ValueError, match=rf"position_ids reach {limit}, beyond the model's max_position_embeddings"):
        build_rope(CONFIG, torch.tensor([0, limit]))
