"""Masks vs HF's create_masks_for_generate, as boolean patterns, under eager and sdpa.

HF's answer is expanded to the pattern it stands for (``None`` = SDPA ``is_causal``), so every
case is compared, including the unpadded ones where sdpa returns ``None``. Tolerance: exact (0
differing entries), since both sides evaluate the same integer predicates.
"""

from __future__ import annotations

import pytest
import torch

from gemma4_static import build_prefill_bool_masks, read_text_config
from gemma4_static.oracle.checks import parity_masks
from gemma4_static.oracle.faults.catalogue import faults_named
from gemma4_static.oracle.references.hf import ATTN_IMPLEMENTATIONS
from gemma4_static.oracle.references.layouts import LENGTHS, PADDINGS, sequence_length, valid_mask
from gemma4_static.oracle.results.report import assert_rows_pass
from gemma4_static.ports.static import decode_masks_of, prefill_masks_of

pytestmark = [
    pytest.mark.usefixtures("hf_answers_kept"),  # HF asked each question once (the tests share its masks)
    pytest.mark.xdist_group("mask-parity"),  # on one worker: HF's answers are a worker's
]
implementations = pytest.mark.parametrize("attn_implementation", ATTN_IMPLEMENTATIONS)


@implementations
@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("length_kind", LENGTHS)
def test_prefill_masks_match_hf(gemma4_model, length_kind, batch, padding, attn_implementation):
    config = gemma4_model.config
    length = sequence_length(length_kind, read_text_config(config).sliding_window)
    valid = valid_mask(padding, batch, length)
    rows = parity_masks.prefill_mask_rows(config, valid, attn_implementation, prefill_masks_of(config))
    assert len(rows) == len(read_text_config(config).unique_layer_types)
    assert all(mask.shape == (batch, 1, length, length) for mask in build_prefill_bool_masks(config, valid).values())
    assert_rows_pass(rows)


@implementations
@pytest.mark.parametrize("padding", ["none", "right", "holes"])
def test_vision_bidirectional_masks_match_hf(tiny_model, padding, attn_implementation):
    """HF's vision path: sliding layers open up inside each image block, full layers stay causal."""
    batch, length = 3, 30
    types = torch.zeros(batch, length, dtype=torch.long)
    types[0, 3:12] = 1  # one image longer than the window (6)
    types[1, 2:6] = 1  # two images back to back with a text gap
    types[1, 7:11] = 1
    types[2, 20:26] = 2  # a video block
    valid = valid_mask(padding, batch, length)
    overlay = build_prefill_bool_masks(tiny_model.config, valid, mm_token_type_ids=types)
    plain = build_prefill_bool_masks(tiny_model.config, valid)
    assert not torch.equal(overlay["sliding_attention"], plain["sliding_attention"])  # the overlay is exercised
    assert_rows_pass(
        parity_masks.prefill_mask_rows(
            tiny_model.config,
            valid,
            attn_implementation,
            prefill_masks_of(tiny_model.config),
            mm_token_type_ids=types,
        )
    )


def _decode_positions(window: int) -> list[int]:
    """Positions around the window edges, so the sliding cache is partly and fully used."""
    return sorted({1, window - 2, window - 1, window, window + 1, 2 * window + 3})


@implementations
@pytest.mark.parametrize("padding", ["none", "left", "holes"])
def test_decode_masks_match_hf_visible_positions(gemma4_model, padding, attn_implementation):
    """Compared as the set of visible absolute positions: HF's sliding cache keeps only the last
    ``window - 1`` keys, the static cache keeps ``max_seq`` slots (4 later slots unwritten, which
    must stay invisible)."""
    config = gemma4_model.config
    window = read_text_config(config).sliding_window
    for position in _decode_positions(window):
        valid = valid_mask(padding, 3, position + 1)
        rows = parity_masks.decode_mask_rows(config, valid, attn_implementation, decode_masks_of(config, unwritten=4))
        assert_rows_pass(rows, context=f"decode at position {position}")


def test_a_broken_mask_fails_with_a_diagram(tiny_model):
    """A failing mask row draws the first query rows that differ: ours / HF / where (x and .)."""
    valid = valid_mask("left", 2, 12)
    with faults_named(["sliding-window-off-by-one"])[0].injected():
        rows = parity_masks.prefill_mask_rows(tiny_model.config, valid, "sdpa", prefill_masks_of(tiny_model.config))
    with pytest.raises(AssertionError) as failure:
        assert_rows_pass(rows)
    message = str(failure.value)
    print(message)
    assert "masks prefill sliding_attention sdpa: batch row 0" in message
    assert "  padding     011111111111" in message  # row 0 is left-padded by one
    # query 9 sees keys 3..9 with the window one too wide; HF's window is 4..9: they differ at key 3
    assert "      9  ...xxxxxxx..  ....xxxxxx..  ...x........" in message


@implementations
@pytest.mark.parametrize("padding", PADDINGS)
def test_chunk_masks_match_hf_rows(gemma4_model, padding, attn_implementation):
    """Each chunk's masks over the slots written so far equal the rows of HF's single-shot mask at
    the chunk's positions, for chunks shorter than, equal to and longer than the window."""
    config = gemma4_model.config
    window = read_text_config(config).sliding_window
    length = sequence_length("above", window)
    valid = valid_mask(padding, 3, length)
    for chunk in sorted({1, window - 1, window, window + 1, 2 * window + 1} - {0}):
        assert_rows_pass(
            parity_masks.chunk_mask_rows(config, valid, chunk, attn_implementation), context=f"chunk {chunk}"
        )


def test_chunk_masks_are_compared_from_the_first_query_on(tiny_model, monkeypatch):
    """A chunk mask wrong only in the first chunk (every written key visible from position 0) fails
    both layer types' rows: no query row is left out of the comparison."""
    build = parity_masks.build_chunk_bool_masks

    def first_chunk_sees_every_key(view, written, positions, **options):
        masks = build(view, written, positions, **options)
        return masks if int(positions[0, 0]) else {name: torch.ones_like(mask) for name, mask in masks.items()}

    monkeypatch.setattr(parity_masks, "build_chunk_bool_masks", first_chunk_sees_every_key)
    rows = parity_masks.chunk_mask_rows(tiny_model.config, torch.ones(1, 9, dtype=torch.bool), 4, "sdpa")
    assert [row.check for row in rows if row.failed] == [row.check for row in rows] and len(rows) == 2


@implementations
def test_chunk_masks_with_an_image_mid_chunk_match_hf_rows(tiny_model, attn_implementation):
    """The image block starts inside a chunk and ends inside the same chunk (window 6, chunk 16)."""
    valid = valid_mask("right", 2, 48)
    types = torch.zeros(2, 48, dtype=torch.long)
    types[0, 19:29] = 1  # chunk [16, 32), the image from offset 3 to 13
    types[1, 34:47] = 1  # chunk [32, 48), longer than the window
    rows = parity_masks.chunk_mask_rows(tiny_model.config, valid, 16, attn_implementation, mm_token_type_ids=types)
    assert_rows_pass(rows)
