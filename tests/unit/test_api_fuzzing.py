"""Error hygiene, fuzzed: every public entry point fed values of the wrong type, shape, dtype or
range (NaN/inf, empty tensors, non-contiguous views included) either works or raises a
``ValueError``/``TypeError`` whose message names the argument: never another exception, never a
message about something else."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import gemma4_static as api
from gemma4_static.oracle.references.models import tiny_config

CONFIG = tiny_config()
MAX_SEQ, BATCH = 12, 2  # the runtime fixture (tests/unit/conftest.py)
VALID = torch.ones(2, 8, dtype=torch.bool)


def _tensors() -> st.SearchStrategy:
    dtypes = st.sampled_from([torch.bool, torch.int8, torch.int32, torch.int64, torch.float16, torch.float32])
    shapes = st.lists(st.integers(0, 9), min_size=0, max_size=4)

    @st.composite
    def build(draw):
        shape, dtype = draw(shapes), draw(dtypes)
        values = torch.randint(-3, 12, shape).to(dtype) if dtype != torch.bool else torch.rand(shape) > 0.5
        if dtype.is_floating_point and values.numel() and draw(st.booleans()):
            values.view(-1)[0] = draw(st.sampled_from([math.nan, math.inf, -math.inf]))
        if values.dim() >= 2 and draw(st.booleans()):
            values = values.transpose(0, 1)  # a non-contiguous view
        return values

    return build()


JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5),
    st.lists(st.integers(-2, 3), max_size=4),
    st.sampled_from([torch.float32, torch.int64, torch.bool, "float32", object()]),
    _tensors(),
)


def _outcome(name: str, call) -> None:
    """``call()`` works, or fails with a ValueError/TypeError naming ``name``."""
    try:
        call()
    except (ValueError, TypeError) as error:
        assert name in str(error), f"{type(error).__name__} does not name {name!r}: {error}"


MASK_CALLS = {
    "text_config": lambda v: api.build_prefill_masks(v, VALID),
    "attention_mask": lambda v: api.build_prefill_masks(CONFIG, v),
    "dtype": lambda v: api.build_prefill_masks(CONFIG, VALID, dtype=v),
    "mask_value": lambda v: api.build_prefill_masks(CONFIG, VALID, mask_value=v),
    "mm_token_type_ids": lambda v: api.build_prefill_bool_masks(CONFIG, VALID, mm_token_type_ids=v),
    "position": lambda v: api.build_decode_masks(CONFIG, VALID, v),
    "positions": lambda v: api.build_chunk_masks(CONFIG, VALID, v),
    "position_ids": lambda v: api.build_rope(CONFIG, v),
    "max_seq": lambda v: api.RopeTables(CONFIG, v),
    "config": lambda v: api.read_text_config(v),
}


@pytest.mark.parametrize("name", list(MASK_CALLS))
@given(value=JUNK)
def test_mask_and_rope_builders(name, value):
    """``text_config`` errors name the config (``text_config``); a config reader names itself."""
    expected = "text_config" if name == "config" else name
    _outcome(expected, lambda: MASK_CALLS[name](value))


CONSTRUCTOR_ARGS = (
    "max_seq",
    "batch_size",
    "image_slots",
    "visual_start_idx",
    "num_visual_tokens",
    "vision_profile",
    "prefill_chunk",
    "sliding_cache",
)


@pytest.mark.parametrize("name", CONSTRUCTOR_ARGS)
@given(value=JUNK)
def test_runtime_constructor(tiny_model, name, value):
    options = {"max_seq": 12, "batch_size": 1, name: value}
    if name == "visual_start_idx":
        options["num_visual_tokens"] = 4
    if name in ("num_visual_tokens", "vision_profile"):
        options["visual_start_idx"] = 1
    if name == "vision_profile":
        options["num_visual_tokens"] = 4
    if isinstance(value, int) and abs(value) > 4096 and name in ("max_seq", "batch_size"):
        value = options[name] = 4097  # valid but slow to allocate: the check is on the type and range
    _outcome(name, lambda: api.StaticGemma4Runtime(tiny_model, **options))


RUNTIME_CALLS = {
    "input_ids": lambda r, v: r.prefill(v),
    "attention_mask": lambda r, v: r.prefill(torch.full((2, 4), 7), v),
    "pixel_values": lambda r, v: r.prefill(torch.full((2, 4), 7), None, v),
    "next_ids": lambda r, v: r.decode_one(v),
    "max_new_tokens": lambda r, v: r.generate(torch.full((2, 4), 7), max_new_tokens=v),
    "eos_token_id": lambda r, v: r.generate(torch.full((2, 4), 7), max_new_tokens=2, eos_token_id=v),
}


@pytest.mark.parametrize("name", list(RUNTIME_CALLS))
@given(value=JUNK)
def test_runtime_calls(runtime, name, value):
    runtime.prefill(torch.full((2, 3), 7))  # a valid state before each bad call
    _outcome(name, lambda: RUNTIME_CALLS[name](runtime, value))
    # and the runtime still works afterwards
    assert runtime.prefill(torch.full((2, 3), 7)).shape == (2, 512)
