"""How far the fuzzer's episodes reach by default: a static length of four windows and a decode past
them (every ring wrap of a sliding cache three times over, and past the fourth), prompt lengths drawn
at and around each window multiple, the longest chunk and the end, and decode runs to the next wrap."""

from __future__ import annotations

from gemma4_static.oracle.fuzz import FuzzTarget
from gemma4_static.oracle.fuzz.strategies import length_anchors, near_anchors
from gemma4_static.oracle.options import VerifyOptions


def test_the_default_static_length_reaches_past_four_windows(tiny_model):
    target = FuzzTarget.of(tiny_model, VerifyOptions())
    window = target.window
    assert target.max_seq == target.capacity == 4 * window + 8 and target.longest_chunk == target.max_seq
    lengths = near_anchors(length_anchors(window, target.longest_chunk, target.capacity), 1, target.capacity)
    for multiple in range(1, 5):  # each ring boundary, and a token either side of it
        assert {multiple * window - 1, multiple * window, multiple * window + 1} <= set(lengths)
    assert {1, 2, target.capacity - 1, target.capacity} <= set(lengths) and max(lengths) == target.capacity
    assert FuzzTarget.of(tiny_model, VerifyOptions(max_seq=20)).max_seq == 20  # asked for: as asked
