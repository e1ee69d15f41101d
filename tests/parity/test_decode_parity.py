"""Static decode, chunked prefill and greedy generation vs HF with its DynamicCache.

HF runs each row of a ragged batch as its own batch-1 call (no padding to reason about); the static
runtime runs the rows together, each at its own position. fp32 logits must agree within
``tolerances.RELATIVE`` (``2e-5 * max(1, max|HF|)``): the same per-layer rounding argument as the
prefill suite, over a path that only appends steps; greedy tokens and argmaxes exactly.
"""

from __future__ import annotations

import pytest
import torch

from gemma4_static.oracle.checks import parity
from gemma4_static.oracle.faults.catalogue import faults_named
from gemma4_static.oracle.references.hf import hf_prefill
from gemma4_static.oracle.references.samples import image_prompt, text_prompt
from gemma4_static.oracle.results.report import assert_rows_pass, merge
from gemma4_static.ports.static import StaticRuntimePort
from gemma4_static.runtime import StaticGemma4Runtime

pytestmark = [
    pytest.mark.usefixtures("hf_answers_kept"),  # HF asked each question once (the two backends share it)
    pytest.mark.xdist_group("decode-parity"),  # on one worker: HF's answers are a worker's
]


def _window(model) -> int:
    return model.config.get_text_config().sliding_window


def _decode_case(model):
    """Prompts ending just before the window edge, so decode crosses it (E2B: past position 512)."""
    window = _window(model)
    lengths = [window - 3, window // 2, 2]
    steps = 2 * window + 3 if window < 64 else 24
    return text_prompt(model.config, lengths), steps


@pytest.mark.parametrize("backend", ["torch", "torch-packed"])
def test_decode_logits_match_hf(gemma4_model, backend, report):
    """``torch-packed`` (weights reordered by oneDNN) is held to the same float32 tolerance: only the
    kernels' summation order differs."""
    prompt, steps = _decode_case(gemma4_model)
    vocab = gemma4_model.config.get_text_config().vocab_size
    tokens = torch.randint(3, min(vocab, 400), (3, steps), generator=torch.Generator().manual_seed(1))
    max_seq = int(prompt.attention_mask.sum(1).max()) + steps
    runtime = StaticGemma4Runtime(gemma4_model, max_seq=max_seq, batch_size=3, backend=backend)
    runtime.prefill(prompt.input_ids, prompt.attention_mask)
    rows = parity.decode_rows(
        gemma4_model, StaticRuntimePort.around(runtime, gemma4_model.config), prompt, tokens, torch.float32
    )
    worst = merge([row for row in rows if row.metric == "max abs diff"], "decode steps", "logits").value
    last = int(runtime.cache.lengths.max()) - 1
    report(f"decode ({backend}): {3 * steps} steps (3 rows x {steps}, up to position {last}), max |diff| {worst:.3g}")
    assert_rows_pass(rows)


@pytest.mark.parametrize("batch", [1, 3])
def test_generate_equals_hf_text(gemma4_model, batch, report):
    window = _window(gemma4_model)
    lengths = [window + 3, window // 2, 3][:batch]
    prompt = text_prompt(gemma4_model.config, lengths, seed=5)
    new_tokens = 12
    runtime = StaticGemma4Runtime(gemma4_model, max_seq=max(lengths) + new_tokens, batch_size=batch)
    assert_rows_pass(
        parity.generation_rows(
            gemma4_model, StaticRuntimePort.around(runtime, gemma4_model.config), prompt, max_new_tokens=new_tokens
        )
    )
    report(f"generate (text, batch {batch}): {batch * new_tokens} tokens identical to HF")


def test_generate_stops_rows_at_eos_like_hf(tiny_model):
    prompt = text_prompt(tiny_model.config, [9, 5, 2], seed=3)
    runtime = StaticGemma4Runtime(tiny_model, max_seq=30, batch_size=3)
    free = runtime.generate(prompt.input_ids, prompt.attention_mask, max_new_tokens=12)
    eos = int(free[1, 3])  # row 1 emits it at step 3, so that row stops early while the others go on
    ours = runtime.generate(prompt.input_ids, prompt.attention_mask, max_new_tokens=12, eos_token_id=eos)
    assert (ours[1, 4:] == runtime.spec.pad_token_id).all()
    assert_rows_pass(
        parity.generation_rows(
            tiny_model,
            StaticRuntimePort.around(runtime, tiny_model.config),
            prompt,
            max_new_tokens=12,
            eos_token_id=eos,
        )
    )


@pytest.mark.parametrize("batch", [1, 2])
def test_generate_equals_hf_with_an_image(tiny_model, batch, report):
    prompt = image_prompt(tiny_model.config, text_after=[6, 2][:batch], seed=7)
    runtime = StaticGemma4Runtime(
        tiny_model,
        max_seq=prompt.input_ids.shape[1] + 10,
        batch_size=batch,
        image_slots=prompt.image_slots,
    )
    assert_rows_pass(
        parity.generation_rows(
            tiny_model, StaticRuntimePort.around(runtime, tiny_model.config), prompt, max_new_tokens=10
        )
    )
    report(f"generate (image, batch {batch}): {batch * 10} tokens identical to HF")


@pytest.mark.parametrize("chunk", [4, 16], ids=["small-chunk", "large-chunk"])
def test_chunked_prefill_equals_single_shot(gemma4_model, chunk, report):
    window = _window(gemma4_model)
    chunk = chunk if window < 64 else 8 * chunk  # E2B: chunks of 32 and 128
    lengths = [2 * window + 3 if window < 64 else window + 3, window - 1, 1]  # past the window
    prompt = text_prompt(gemma4_model.config, lengths, seed=2)
    max_seq = -(-(max(lengths) + 1) // chunk) * chunk
    single = StaticGemma4Runtime(gemma4_model, max_seq=max_seq, batch_size=3)
    chunked = StaticGemma4Runtime(gemma4_model, max_seq=max_seq, batch_size=3, prefill_chunk=chunk)
    expected = single.prefill(prompt.input_ids, prompt.attention_mask)
    logits = chunked.prefill(prompt.input_ids, prompt.attention_mask)
    _assert_within("chunked logits", logits, expected, report)
    # both runtimes use the same layout: every slot that holds a position
    assert_rows_pass(parity.cache_rows("chunked prefill", chunked.cache, single.cache))
    assert torch.equal(chunked.cache.lengths, single.cache.lengths)


def test_chunked_prefill_with_an_image_mid_chunk_matches_hf(tiny_model, report):
    """The image starts 10 tokens into the second chunk of 80 and ends inside it (its tokens attend
    to each other bidirectionally, all within one chunk): logits vs HF and vs single shot, then the
    K/V of every row and producing layer vs HF's cache of that row."""
    prompt = image_prompt(tiny_model.config, text_after=[5, 1], text_before=89, seed=4)
    chunk = 80
    assert prompt.image_slots == ((chunk + 10, 64),)
    kwargs = {"image_slots": prompt.image_slots, "batch_size": 2, "max_seq": 3 * chunk}
    single = StaticGemma4Runtime(tiny_model, **kwargs)
    chunked = StaticGemma4Runtime(tiny_model, prefill_chunk=chunk, **kwargs)
    args = (prompt.input_ids, prompt.attention_mask, prompt.pixel_values, prompt.image_position_ids)
    logits = chunked.prefill(*args)
    theirs = hf_prefill(tiny_model, prompt).logits[torch.arange(2), prompt.last_index]
    rows = parity.logits_rows(logits, theirs, torch.float32)
    rows += parity.kv_rows(StaticRuntimePort.around(chunked, tiny_model.config), tiny_model, prompt, torch.float32)
    report(f"chunked prefill, image mid-chunk: logits vs HF {rows[0].value:.3g}")
    assert_rows_pass(rows)
    _assert_within("chunked logits (image)", logits, single.prefill(*args), report)


def _assert_within(name, ours, theirs, report) -> None:
    """Chunked vs single-shot: the same fp32 stage tolerance as against HF (only summation orders differ)."""
    row = parity.stage_row("chunked prefill", name, ours, theirs, torch.float32)
    if report is not None:
        report(f"{name}: max abs diff {row.value:.3g}")
    assert_rows_pass([row])


def test_a_decode_mismatch_names_its_first_step(tiny_model):
    """A window one key too wide shows only once a decode position reaches the window (6): with a
    3-token prompt that is step 3, and the failing row says so. (On the ring layout the cache holds
    only the window's keys, so this bug cannot show in decode at all.)"""
    prompt = text_prompt(tiny_model.config, [3], seed=1)
    tokens = torch.randint(3, 400, (1, 8), generator=torch.Generator().manual_seed(2))
    with faults_named(["sliding-window-off-by-one"])[0].injected():
        runtime = StaticGemma4Runtime(tiny_model, max_seq=12, sliding_cache="full")
        runtime.prefill(prompt.input_ids, prompt.attention_mask)
        rows = parity.decode_rows(
            tiny_model, StaticRuntimePort.around(runtime, tiny_model.config), prompt, tokens, torch.float32
        )
    assert rows[0].check == "row 0 logits [first: step 3]" and rows[0].failed


def test_decode_where_each_kv_head_serves_several_query_heads_matches_hf(moe_geometry_model, report):
    """The 26B-A4B geometry's full layers: 8 query heads over 2 K/V heads, the one embedded model
    where a decode step's grouping of query heads per K/V head could go wrong unseen (every other
    has one K/V head, or one query head per K/V head). Same float32 tolerance as above."""
    runtime = StaticGemma4Runtime(moe_geometry_model, max_seq=16, batch_size=2)
    heads = {(layer.q_proj.out_features // layer.head_dim, layer.num_kv_heads) for layer in runtime.modules.layers}
    assert (8, 2) in heads  # the case this test exists for
    prompt = text_prompt(moe_geometry_model.config, [7, 4], seed=9)
    vocab = moe_geometry_model.config.get_text_config().vocab_size
    tokens = torch.randint(3, min(vocab, 400), (2, 4), generator=torch.Generator().manual_seed(2))
    runtime.prefill(prompt.input_ids, prompt.attention_mask)
    port = StaticRuntimePort.around(runtime, moe_geometry_model.config)
    rows = parity.decode_rows(moe_geometry_model, port, prompt, tokens, torch.float32)
    report(f"decode (26B-A4B geometry, 8 query heads over 2 K/V heads): max |diff| {rows[0].value:.3g}")
    assert_rows_pass(rows)
