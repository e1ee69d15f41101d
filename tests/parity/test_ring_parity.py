"""Window-sized ring caches for sliding layers vs HF and vs the max_seq layout, across many wraps.

Decode runs until every row has wrapped the ring at least three times (positions past ``4 x W`` on
the tiny model's window of 6, and across 512 on the E2B geometry in the decode suite), for
prompts shorter than, equal to and longer than the window, ragged, with and without an image.
Tolerances: ``tolerances.RELATIVE`` (fp32; the ring only changes which slot holds a key, so the
sums see the same keys in another order), greedy tokens exactly.
"""

from __future__ import annotations

import pytest
import torch

from gemma4_static.oracle.checks import parity
from gemma4_static.oracle.references.hf import hf_prefill
from gemma4_static.oracle.references.samples import image_prompt, text_prompt
from gemma4_static.oracle.results.report import assert_rows_pass, merge
from gemma4_static.ports.static import StaticRuntimePort
from gemma4_static.runtime import StaticGemma4Runtime

pytestmark = [
    pytest.mark.usefixtures("hf_answers_kept"),  # HF asked each question once (the layouts and chunks share them)
    pytest.mark.xdist_group("ring-parity"),  # on one worker: HF's answers are a worker's
]
FP32 = torch.float32
WINDOW = 6  # the tiny model's


def _tokens(batch: int, steps: int) -> torch.Tensor:
    return torch.randint(3, 400, (batch, steps), generator=torch.Generator().manual_seed(11))


@pytest.mark.parametrize("sliding_cache", ["ring", "full"])
def test_decode_across_many_wraps_matches_hf(tiny_model, sliding_cache, report):
    prompt = text_prompt(tiny_model.config, [WINDOW + 4, WINDOW, WINDOW - 3], seed=4)
    steps = 3 * WINDOW + 8  # the shortest row ends past 4 x W, every row wraps >= 3 times
    runtime = StaticGemma4Runtime(tiny_model, max_seq=WINDOW + 4 + steps, batch_size=3, sliding_cache=sliding_cache)
    assert runtime.cache.is_ring("sliding_attention") == (sliding_cache == "ring")
    runtime.prefill(prompt.input_ids, prompt.attention_mask)
    rows = parity.decode_rows(
        tiny_model, StaticRuntimePort.around(runtime, tiny_model.config), prompt, _tokens(3, steps), FP32
    )
    worst = merge([row for row in rows if row.metric == "max abs diff"], "decode", "logits").value
    report(f"{sliding_cache} decode to position {int(runtime.cache.lengths.max()) - 1}: logits {worst:.3g}")
    assert_rows_pass(rows)


def test_generation_across_many_wraps_with_an_image_matches_hf(tiny_model, report):
    prompt = image_prompt(tiny_model.config, text_after=[7, 2], seed=2)
    new = 4 * WINDOW
    runtime = StaticGemma4Runtime(
        tiny_model, max_seq=prompt.input_ids.shape[1] + new, batch_size=2, image_slots=prompt.image_slots
    )
    assert runtime.cache.capacity["sliding_attention"] == WINDOW
    rows = parity.generation_rows(
        tiny_model, StaticRuntimePort.around(runtime, tiny_model.config), prompt, max_new_tokens=new
    )
    report(f"ring generation with an image: {2 * new} tokens, {sum(row.value for row in rows)} mismatched")
    assert_rows_pass(rows)


@pytest.mark.parametrize(
    "chunk", [4, WINDOW - 1, WINDOW, WINDOW + 1, 16], ids=["chunk<W", "chunk=W-1", "chunk=W", "chunk=W+1", "chunk>W"]
)
def test_chunked_ring_prefill_matches_single_shot_and_hf(tiny_model, chunk, report):
    prompt = text_prompt(tiny_model.config, [37, 16, 3], seed=6)
    max_seq = -(-48 // chunk) * chunk  # the chunks tile the static length
    single = StaticGemma4Runtime(tiny_model, max_seq=max_seq, batch_size=3)
    chunked = StaticGemma4Runtime(tiny_model, max_seq=max_seq, batch_size=3, prefill_chunk=chunk)
    theirs = hf_prefill(tiny_model, prompt).logits[torch.arange(3), prompt.last_index]
    ours = chunked.prefill(prompt.input_ids, prompt.attention_mask)
    rows = parity.logits_rows(ours, theirs, FP32)
    rows.append(
        parity.stage_row(
            "chunked prefill", "vs single shot", ours, single.prefill(prompt.input_ids, prompt.attention_mask), FP32
        )
    )
    rows += parity.cache_rows("chunked prefill", chunked.cache, single.cache)  # the same ring, slot by slot
    rows += parity.kv_rows(
        StaticRuntimePort.around(chunked, tiny_model.config), tiny_model, prompt, FP32
    )  # every row's K/V vs HF's cache of that row
    report(f"ring chunk {chunk}: logits vs HF {rows[0].value:.3g}")
    assert_rows_pass(rows)
    # then decode on: the chunked ring keeps working
    tokens = _tokens(3, max_seq - 37)  # to the last slot, past another wrap
    assert_rows_pass(
        parity.decode_rows(tiny_model, StaticRuntimePort.around(chunked, tiny_model.config), prompt, tokens, FP32)
    )


def test_ring_holds_the_window_and_never_fills(tiny_model):
    runtime = StaticGemma4Runtime(tiny_model, max_seq=40, batch_size=1)
    cache = runtime.cache
    assert cache.capacity == {"full_attention": 40, "sliding_attention": WINDOW}
    for layer, buffer in cache.keys.items():
        assert buffer.shape[2] == cache.capacity[cache.layer_types[layer]]
    runtime.prefill(torch.full((1, 39), 7))
    runtime.decode_one(torch.full((1, 1), 7))  # position 39 wraps the ring for the 6th time: no error
    positions = cache.key_positions("sliding_attention", cache.lengths)
    assert sorted(positions[0].tolist()) == list(range(40 - WINDOW, 40))
    with pytest.raises(ValueError, match=r"cache is full: rows \[0\] already hold max_seq=40 tokens"):
        runtime.decode_one(torch.full((1, 1), 7))  # the full layers have no slot left


def test_decode_after_an_image_across_wraps_matches_hf(tiny_model, report):
    """Decode logits (not only tokens) after an image, until the ring has wrapped three more times."""
    prompt = image_prompt(tiny_model.config, text_after=[5, 1], seed=8)
    steps = 3 * WINDOW + 1
    runtime = StaticGemma4Runtime(
        tiny_model, max_seq=prompt.input_ids.shape[1] + steps, batch_size=2, image_slots=prompt.image_slots
    )
    runtime.prefill(prompt.input_ids, prompt.attention_mask, prompt.pixel_values, prompt.image_position_ids)
    rows = parity.decode_rows(
        tiny_model, StaticRuntimePort.around(runtime, tiny_model.config), prompt, _tokens(2, steps), FP32
    )
    worst = max(row.value for row in rows if "logits" in row.check)
    report(f"ring decode after an image, {steps} steps: logits {worst:.3g}")
    assert_rows_pass(rows)
