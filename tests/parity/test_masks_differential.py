"""Differential property test: HF and the static builders get the same generated config and padding."""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from gemma4_static import PrefillMaskBuffers, build_decode_bool_masks, build_prefill_bool_masks
from gemma4_static.oracle.references.hf import ATTN_IMPLEMENTATIONS, hf_decode_visible_positions, hf_prefill_bool_masks
from gemma4_static.oracle.references.models import tiny_config
from tests.strategies import padding_changes, small_text_config, text_configs, token_types, valid_masks

implementations = st.sampled_from(ATTN_IMPLEMENTATIONS)


@given(text_configs(bidirectional=st.sampled_from([None, "vision", "all"])), valid_masks(), implementations)
def test_prefill_masks_equal_hf(config, valid, attn_implementation):
    ours = build_prefill_bool_masks(config, valid)
    theirs = hf_prefill_bool_masks(config, valid, attn_implementation=attn_implementation)
    assert ours.keys() == theirs.keys()
    for name in ours:
        assert torch.equal(ours[name], theirs[name]), name


@given(text_configs(bidirectional=st.sampled_from([None, "vision", "all"])), valid_masks(), implementations, st.data())
def test_kept_prefill_masks_equal_hf_call_after_call(config, first, attn_implementation, data):
    """The runtime's kept buffers, rewritten only where the padding changed, hold HF's masks after
    every call of a sequence of prompts (any layouts, so both the partial rewrite and the full pass run)."""
    buffers = PrefillMaskBuffers(config, first.shape[1], batch_size=first.shape[0])
    valid = first
    for _ in range(data.draw(st.integers(2, 5))):
        theirs = hf_prefill_bool_masks(config, valid, attn_implementation=attn_implementation)
        ours = buffers(valid)
        assert ours.keys() == theirs.keys()
        for name in ours:
            assert torch.equal(ours[name] == 0, theirs[name]), name
        valid = data.draw(padding_changes(valid))


@given(text_configs(bidirectional=st.just("vision")), valid_masks(max_length=32), implementations, st.data())
def test_vision_prefill_masks_equal_hf(config, valid, attn_implementation, data):
    types = data.draw(token_types(tuple(valid.shape)))
    composite = tiny_config()
    composite.text_config = config
    ours = build_prefill_bool_masks(config, valid, mm_token_type_ids=types)
    theirs = hf_prefill_bool_masks(composite, valid, attn_implementation=attn_implementation, mm_token_type_ids=types)
    for name in ours:
        assert torch.equal(ours[name], theirs[name]), name


@given(text_configs(bidirectional=st.just(None)), valid_masks(max_length=60), implementations)
def test_decode_visible_positions_equal_hf(config, valid, attn_implementation):
    valid = valid.clone()
    valid[:, -1] = True  # the new token occupies the last slot
    position = valid.shape[1] - 1
    theirs = hf_decode_visible_positions(config, valid, attn_implementation=attn_implementation)
    ours = build_decode_bool_masks(config, valid, position)
    for name in ours:
        assert torch.equal(ours[name][:, 0, 0], theirs[name]), name


def test_hf_none_for_an_unpadded_bidirectional_model_means_every_key():
    """Found by the differential test: HF skips the mask of an unpadded "all" model, and there
    ``None`` stands for no mask at all, not for SDPA's causal shortcut."""
    config = small_text_config(sliding_window=1, layer_types=["full_attention"], bidirectional="all")
    valid = torch.ones(1, 2, dtype=torch.bool)
    for attn_implementation in ATTN_IMPLEMENTATIONS:
        theirs = hf_prefill_bool_masks(config, valid, attn_implementation=attn_implementation)
        assert torch.equal(theirs["full_attention"], torch.ones(1, 1, 2, 2, dtype=torch.bool))
        assert torch.equal(build_prefill_bool_masks(config, valid)["full_attention"], theirs["full_attention"])
