"""Prefill schedules: how a schedule expands over a prompt, which chunks a port's limits refuse, the
runtime taking any schedule (chunks of different lengths in one prefill) with HF's logits at every
chunk's end, and the schedules grid's plan within its budget."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gemma4_static.cpu.schedule import checked_schedule, chunk_starts, expand_schedule
from gemma4_static.oracle.episodes.boundaries import chunk_schedules, decode_steps, prompt_lengths
from gemma4_static.oracle.episodes.cases import chunks_text, plan
from gemma4_static.oracle.episodes.judgement import hf_history_logits
from gemma4_static.oracle.references.samples import image_prompt, text_prompt
from gemma4_static.oracle.results import tolerances
from gemma4_static.ports import BatchLimits, ChunkLimits, Contracts, ImageLimits, PortLimits, PortSetup, SchemeLimits
from gemma4_static.ports.static import StaticRuntimePort
from gemma4_static.runtime import StaticGemma4Runtime
from tests.strategies import around

MAX_SEQ = 24


def test_a_schedule_repeats_its_last_length_and_cuts_the_chunk_that_reaches_the_end():
    assert expand_schedule((7,), 15) == [7, 7, 1]
    assert expand_schedule((1, 6, 3), 16) == [1, 6, 3, 3, 3]
    assert expand_schedule((20,), 5) == [5]
    assert chunk_starts([1, 6, 3]) == [0, 1, 7]
    assert PortSetup(32, prefill_schedule=(4, 2)).chunks(9) == [4, 2, 2, 1]
    assert PortSetup(32).chunks(9) is None  # the port's own policy


@given(schedule=st.lists(st.integers(1, 9), min_size=1, max_size=4), length=st.integers(1, 40))
def test_expanded_chunks_cover_the_prompt_exactly(schedule, length):
    chunks = expand_schedule(tuple(schedule), length)
    assert sum(chunks) == length and all(chunk >= 1 for chunk in chunks)
    assert chunks[:-1] == [schedule[min(i, len(schedule) - 1)] for i in range(len(chunks) - 1)]


@pytest.mark.parametrize(
    ("schedule", "error", "message"),
    [
        ((), ValueError, "schedule must name at least one chunk length, got ()"),
        ((4, 0), ValueError, "schedule must hold chunk lengths >= 1, got 0 in (4, 0)"),
        ((4, 2.0), TypeError, "schedule must hold ints (chunk lengths), got 2.0"),
        ("44", TypeError, "schedule must be a sequence of chunk lengths"),
        (4, TypeError, "schedule must be a sequence of chunk lengths"),
    ],
)
def test_bad_schedules_are_clear_errors(schedule, error, message):
    with pytest.raises(error) as raised:
        checked_schedule(schedule)
    assert message in str(raised.value)


@pytest.mark.parametrize(
    ("limits", "chunks", "reason"),
    [
        (ChunkLimits(), [5, 5], "it prefills in one call"),
        (ChunkLimits(chunked=True), [5, 5, 1], None),
        (ChunkLimits(chunked=True, max_length=4), [5, 1], "a chunk of 5 exceeds its max_length 4"),
        (ChunkLimits(chunked=True, fixed=4), [4, 4, 3], None),
        (ChunkLimits(chunked=True, fixed=4), [4, 3, 4], "its program takes chunks of 4"),
        (ChunkLimits(chunked=True, uniform=True), [3, 3, 2], None),
        (ChunkLimits(chunked=True, uniform=True), [2, 3], "its chunks are all one length (set when it is built)"),
        (ChunkLimits(chunked=True, min_length=2), [1, 2], "a chunk below its min_length 2"),
        (ChunkLimits(chunked=True, multiple=4), [4, 8, 3], None),
        (ChunkLimits(chunked=True, multiple=4), [6, 3], "a chunk that is not a multiple of 4"),
        # the edges: the first and the last chunk each bound by max_length; only the last may be
        # shorter than min_length, fixed or uniform, or not a multiple, and never longer
        (ChunkLimits(chunked=True, max_length=4), [1, 5], "a chunk of 5 exceeds its max_length 4"),
        (ChunkLimits(chunked=True, max_length=4), [4, 4], None),
        (ChunkLimits(chunked=True, min_length=2), [2, 1], None),
        (ChunkLimits(chunked=True, min_length=2), [2, 2, 1, 1], "a chunk below its min_length 2"),
        (ChunkLimits(chunked=True, fixed=4), [4, 5], "a chunk of 5 exceeds its fixed chunk 4"),
        (ChunkLimits(chunked=True, fixed=4), [3, 3], "its program takes chunks of 4"),
        (ChunkLimits(chunked=True, fixed=4), [5], "a chunk of 5 exceeds its fixed chunk 4"),
        (ChunkLimits(chunked=True, uniform=True), [3, 2, 3], "its chunks are all one length (set when it is built)"),
        (ChunkLimits(chunked=True, uniform=True), [3, 3], None),
        (ChunkLimits(chunked=True, multiple=4), [3, 4], "a chunk that is not a multiple of 4"),
        (ChunkLimits(), [7], None),
    ],
)
def test_port_limits_say_which_chunks_a_port_refuses(limits, chunks, reason):
    refusal = limits.refusal(chunks)
    assert refusal == reason


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        (
            lambda: BatchLimits(padding_side="middle"),
            "padding_side must be one of ('right', 'left', None), got 'middle'",
        ),
        (lambda: ChunkLimits(max_length=0), "max_length must be a positive int or None, got 0"),
        (lambda: ImageLimits(required=True), "required=True needs accepted=True"),
        (lambda: SchemeLimits(("8da4w", "int4")), "quant scheme 'int4' has an unknown base 'int4'"),
        (lambda: PortLimits(max_seq=0), "max_seq must be a positive int or None, got 0"),
        (lambda: Contracts(generate_leaves="some"), "generate_leaves must be one of"),
        (lambda: PortLimits(bytes_per_parameter=-1.0), "bytes_per_parameter must be a number from 0 to 1000, got -1.0"),
        (lambda: PortLimits(bytes_per_parameter=float("nan")), "bytes_per_parameter must be a number from 0 to 1000"),
        (lambda: PortLimits(bytes_per_parameter="8"), "bytes_per_parameter must be a number from 0 to 1000, got '8'"),
        (lambda: PortLimits(bytes_per_parameter=True), "bytes_per_parameter must be a number from 0 to 1000, got True"),
    ],
)
def test_bad_port_limits_are_clear_errors(limits, message):
    with pytest.raises(ValueError) as raised:
        limits()
    assert message in str(raised.value)


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        (lambda: PortLimits(images=True), "PortLimits.images must be a ImageLimits, got True"),
        (lambda: PortLimits(batch=1), "PortLimits.batch must be a BatchLimits, got 1"),
        (lambda: PortLimits(dtypes=("float32",)), "PortLimits.dtypes must be a non-empty tuple of torch dtypes"),
        (lambda: ImageLimits(accepted=True, profiles=("e2b",)), "profiles must hold ImageProfile values"),
    ],
)
def test_port_limits_of_the_wrong_type_are_clear_errors(limits, message):
    """A flat field where a concern belongs (``images=True`` of the older interface) is refused by name."""
    with pytest.raises(TypeError) as raised:
        limits()
    assert message in str(raised.value)


@settings(max_examples=15, deadline=None)
@given(
    schedule=st.lists(st.integers(1, 14), min_size=1, max_size=4),
    lengths=st.lists(around(1, MAX_SEQ).filter(lambda n: 1 <= n <= MAX_SEQ), min_size=2, max_size=2),
)
def test_the_runtime_takes_any_schedule_with_hfs_logits_at_every_chunk_end(runtime, tiny_model, schedule, lengths):
    prompt = text_prompt(tiny_model.config, lengths, seed=sum(lengths))
    inputs = runtime.build_inputs(prompt.input_ids, prompt.attention_mask)
    out = runtime.prefill_outputs(inputs, keep_intermediates=True, schedule=tuple(schedule))
    chunks = expand_schedule(tuple(schedule), max(lengths))
    assert out.chunk_logits is not None and len(out.chunk_logits) == len(chunks)
    for row, length in enumerate(lengths):
        reference = hf_history_logits(tiny_model, prompt.input_ids[row, :length])
        bound = tolerances.relative(torch.float32, reference)
        assert float((out.logits[row] - reference[length - 1]).abs().max()) <= bound
        for start, chunk, logits in zip(chunk_starts(chunks), chunks, out.chunk_logits, strict=True):
            if start < length:
                end = min(start + chunk, length) - 1
                assert float((logits[row] - reference[end]).abs().max()) <= bound, (row, start, chunk)


def test_a_schedule_splitting_an_image_slot_is_refused_before_anything_changes(tiny_model):
    prompt = image_prompt(tiny_model.config, text_after=[3, 2])
    (start, tokens), *_ = prompt.image_slots
    runtime = StaticGemma4Runtime(
        tiny_model, max_seq=prompt.input_ids.shape[1] + 2, batch_size=2, image_slots=prompt.image_slots
    )
    with pytest.raises(ValueError, match=r"schedule \(5,\) ends a chunk inside the image slot"):
        runtime.prefill(prompt.input_ids, prompt.attention_mask, prompt.pixel_values, schedule=(5,))
    assert not runtime.prefilled and start < 5 < start + tokens


def test_the_grid_plans_within_its_budget_the_most_telling_schedules_first(tiny_model):
    window = 6
    port = StaticRuntimePort(tiny_model, PortSetup(36))
    full, refused, dropped = plan(port, window, 36, budget=10**6)
    assert refused == dropped == []
    assert {case.length for case in full} == set(prompt_lengths(window, 34)) == {1, 5, 6, 7, 12, 13, 20, 27}
    # one call and chunks of C = 36 give this runtime's own policy's chunks (one call): kept once
    assert {case.name for case in full} == set(chunk_schedules(window, 36)) - {"one call", "chunks of C"}
    assert all(sum(case.chunks) == case.length and case.steps == decode_steps(case.length, window) for case in full)
    some, _, dropped = plan(port, window, 36, budget=100)
    assert sum(case.cost for case in some) <= 100 and len(dropped) == len(full) - len(some) > 0
    assert some[0].name == "policy"
    assert chunks_text((1, 6, 2, 7, 3, 3, 3, 3)) == "[1, 6, 2, 7, 3 x 4]" and chunks_text((7, 7, 1)) == "[7, 7, 1]"


def test_decode_crosses_the_next_ring_wrap_when_it_is_near():
    assert [decode_steps(length, 6) for length in (1, 5, 6, 7)] == [7, 3, 2, 7]
    assert [decode_steps(length, 512) for length in (1, 511, 512, 513)] == [4, 3, 2, 4]
