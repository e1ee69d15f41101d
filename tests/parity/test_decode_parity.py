"""Static decode, chunked prefill and greedy generation vs HF with its DynamicCache.

HF runs each row of a ragged batch as its own batch-1 call (no padding to reason about); the static
runtime runs the rows together, each at its own position. fp32 logits must agree within
``2e-5 * max(1, max|HF|)``: the same per-layer rounding argument as the prefill suite, over a path
that only appends steps.
"""

from __future__ import annotations

import pytest
import torch

from gemma4_static.reference import hf_decode_logits, hf_generate
from gemma4_static.runtime import StaticGemma4Runtime
from gemma4_static.samples import image_prompt, text_prompt

RELATIVE_TOLERANCE = 2e-5


def _window(model) -> int:
    return model.config.get_text_config().sliding_window


def _decode_case(model):
    """Prompts ending just before the window edge, so decode crosses it (E2B: past position 512)."""
    window = _window(model)
    lengths = [window - 3, window // 2, 2]
    steps = 2 * window + 3 if window < 64 else 24
    return text_prompt(model.config, lengths), steps


def test_decode_logits_match_hf(gemma4_model, report):
    prompt, steps = _decode_case(gemma4_model)
    vocab = gemma4_model.config.get_text_config().vocab_size
    tokens = torch.randint(3, min(vocab, 400), (3, steps), generator=torch.Generator().manual_seed(1))
    runtime = StaticGemma4Runtime(gemma4_model, max_seq=int(prompt.attention_mask.sum(1).max()) + steps, batch_size=3)
    runtime.prefill(prompt.input_ids, prompt.attention_mask)
    ours = torch.stack([runtime.decode_one(tokens[:, t : t + 1]) for t in range(steps)], dim=1)  # (B, T, V)
    worst = 0.0
    for row in range(3):
        theirs = hf_decode_logits(gemma4_model, prompt.row(row), tokens[row])
        error = float((ours[row] - theirs).abs().max())
        assert error <= RELATIVE_TOLERANCE * max(1.0, float(theirs.abs().max())), f"row {row}: {error}"
        assert torch.equal(ours[row].argmax(-1), theirs.argmax(-1))
        worst = max(worst, error)
    last = int(runtime.cache.lengths.max()) - 1
    report(f"decode: {3 * steps} steps (3 rows x {steps}, up to position {last}), max |logit diff| {worst:.3g}")


@pytest.mark.parametrize("batch", [1, 3])
def test_generate_equals_hf_text(gemma4_model, batch, report):
    window = _window(gemma4_model)
    lengths = [window + 3, window // 2, 3][:batch]
    prompt = text_prompt(gemma4_model.config, lengths, seed=5)
    new_tokens = 12
    runtime = StaticGemma4Runtime(gemma4_model, max_seq=max(lengths) + new_tokens, batch_size=batch)
    ours = runtime.generate(prompt.input_ids, prompt.attention_mask, max_new_tokens=new_tokens)
    for row in range(batch):
        theirs = hf_generate(gemma4_model, prompt.row(row), max_new_tokens=new_tokens, eos_token_id=None)
        assert torch.equal(ours[row], theirs), f"row {row}: {ours[row].tolist()} != {theirs.tolist()}"
    report(f"generate (text, batch {batch}): {batch * new_tokens} tokens identical to HF")


def test_generate_stops_rows_at_eos_like_hf(tiny_model):
    prompt = text_prompt(tiny_model.config, [9, 5, 2], seed=3)
    runtime = StaticGemma4Runtime(tiny_model, max_seq=30, batch_size=3)
    free = runtime.generate(prompt.input_ids, prompt.attention_mask, max_new_tokens=12)
    eos = int(free[1, 3])  # row 1 emits it at step 3, so that row stops early while the others go on
    ours = runtime.generate(prompt.input_ids, prompt.attention_mask, max_new_tokens=12, eos_token_id=eos)
    assert (ours[1, 4:] == runtime.pad_token_id).all()
    for row in range(3):
        assert torch.equal(ours[row], hf_generate(tiny_model, prompt.row(row), max_new_tokens=12, eos_token_id=eos))


@pytest.mark.parametrize("batch", [1, 2])
def test_generate_equals_hf_with_an_image(tiny_model, batch, report):
    prompt = image_prompt(tiny_model.config, text_after=[6, 2][:batch], seed=7)
    runtime = StaticGemma4Runtime(
        tiny_model,
        max_seq=prompt.input_ids.shape[1] + 10,
        batch_size=batch,
        **prompt.image_slot,
    )
    ours = runtime.generate(
        prompt.input_ids,
        prompt.attention_mask,
        max_new_tokens=10,
        pixel_values=prompt.pixel_values,
        image_position_ids=prompt.image_position_ids,
    )
    for row in range(batch):
        assert torch.equal(ours[row], hf_generate(tiny_model, prompt.row(row), max_new_tokens=10, eos_token_id=None))
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
    valid = torch.arange(max_seq)[None, :] < torch.tensor(lengths)[:, None]
    for layer in single.cache.keys:
        for name, ours, theirs in (
            ("K", chunked.cache.keys, single.cache.keys),
            ("V", chunked.cache.values, single.cache.values),
        ):
            _assert_within(
                f"chunked layer {layer} {name}",
                ours[layer].transpose(1, 2)[valid],
                theirs[layer].transpose(1, 2)[valid],
                None,
            )
    assert torch.equal(chunked.cache.lengths, single.cache.lengths)


def test_chunked_prefill_with_an_image(tiny_model, report):
    """The image slot fills the middle chunk exactly (its tokens attend bidirectionally inside it)."""
    prompt = image_prompt(tiny_model.config, text_after=[5, 1], text_before=63, seed=4)
    chunk = prompt.num_visual_tokens
    assert prompt.visual_start_idx == chunk == 64
    kwargs = {"visual_start_idx": 64, "num_visual_tokens": 64, "batch_size": 2, "max_seq": 3 * chunk}
    single = StaticGemma4Runtime(tiny_model, **kwargs)
    chunked = StaticGemma4Runtime(tiny_model, prefill_chunk=chunk, **kwargs)
    args = (prompt.input_ids, prompt.attention_mask, prompt.pixel_values, prompt.image_position_ids)
    _assert_within("chunked logits (image)", chunked.prefill(*args), single.prefill(*args), report)


def _assert_within(name, ours, theirs, report) -> None:
    error = float((ours - theirs).abs().max())
    scale = max(1.0, float(theirs.abs().max()))
    if report is not None:
        report(f"{name}: max abs diff {error:.3g}")
    assert error <= RELATIVE_TOLERANCE * scale, f"{name}: {error}"
