"""Exact boundaries, drawn explicitly beside the values around them: the first and last valid id and
the first ones outside the vocabulary, an image slot that fills its vision profile exactly and one
token more, a prompt of exactly ``max_seq`` and one token more. A check weakened by one (``>=`` to
``>``, ``<`` to ``<=``) fails here, where a uniform draw would almost never land on the edge."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from gemma4_static.cpu.layout import StaticLayout
from gemma4_static.cpu.vision import VISION_PROFILES
from tests.strategies import around

MAX_SEQ = 8
BATCH = 1


def _vocab(runtime) -> int:
    return runtime.spec.vocab_size


@given(data=st.data())
def test_ids_inside_the_vocabulary_are_taken_and_the_first_outside_refused(runtime, data):
    vocab = _vocab(runtime)
    token = data.draw(around(0, vocab - 1), label="id")
    ids = torch.tensor([[2, 7, token]])
    if token == runtime.spec.image_token_id:  # inside the vocabulary, but only an image slot may hold it
        with pytest.raises(ValueError, match="image placeholder tokens, but the layout has no image slot"):
            runtime.prefill(ids)
        return
    if 0 <= token < vocab:
        assert runtime.prefill(ids).shape == (1, vocab)
        assert runtime.decode_one(torch.tensor([[token]])).shape == (1, vocab)
        return
    with pytest.raises(ValueError, match=rf"ids outside the vocabulary \[0, {vocab}\)"):
        runtime.prefill(ids)
    runtime.prefill(torch.tensor([[2, 7]]))
    with pytest.raises(ValueError, match=rf"next_ids hold ids outside the vocabulary \[0, {vocab}\)"):
        runtime.decode_one(torch.tensor([[token]]))


@given(profile=st.sampled_from(VISION_PROFILES), data=st.data())
def test_an_image_slot_may_fill_its_vision_profile_exactly(profile, data):
    tokens = data.draw(around(1, profile), label="soft tokens")
    build = lambda: StaticLayout(profile + 8, image_slots=((1, tokens),), vision_profiles=(profile,))  # noqa: E731
    if 1 <= tokens <= profile:
        assert build().vision_profiles == (profile,)
        return
    with pytest.raises(ValueError, match=r"image slot|vision_profile"):
        build()


@given(data=st.data())
def test_a_prompt_of_exactly_max_seq_is_taken(runtime, data):
    length = data.draw(around(1, MAX_SEQ).filter(lambda length: length >= 0), label="length")
    ids = torch.full((1, length), 7)
    if 1 <= length <= MAX_SEQ:
        assert runtime.prefill(ids).shape == (1, _vocab(runtime))
        return
    with pytest.raises(ValueError, match=r"input_ids|max_seq"):
        runtime.prefill(ids)
