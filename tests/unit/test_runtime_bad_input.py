"""Bad input to the static prefill fails with a clear error, not a wrong answer."""

from __future__ import annotations

import importlib.util

import pytest
import torch
from transformers import Gemma4UnifiedForCausalLM, Gemma4UnifiedTextConfig

from gemma4_static.cpu.inputs import StaticLayout
from gemma4_static.oracle.references.samples import text_prompt
from gemma4_static.runtime import StaticGemma4Runtime


def test_prompt_longer_than_max_seq(text_runtime, tiny_model):
    prompt = text_prompt(tiny_model.config, [17, 3])
    with pytest.raises(ValueError, match=r"prompt length 17 is longer than max_seq=16"):
        text_runtime.prefill(prompt.input_ids, prompt.attention_mask)


@pytest.mark.parametrize(
    "mask", [[[1, 1, 1, 1], [1, 0, 1, 1]], [[0, 1, 0, 1], [1, 1, 1, 1]]], ids=["hole", "left and hole"]
)
def test_holes_are_rejected_saying_why(text_runtime, mask):
    ids = torch.full((2, 4), 7)
    with pytest.raises(ValueError, match=r"attention_mask rows \[\d\] have holes .* a hole changes the distances"):
        text_runtime.prefill(ids, torch.tensor(mask))


def test_batch_size_must_match_the_layout(text_runtime):
    with pytest.raises(ValueError, match=r"input_ids has batch size 3, but the layout's batch_size is 2"):
        text_runtime.prefill(torch.full((3, 4), 7))


def test_ids_outside_the_vocabulary(text_runtime):
    ids = torch.full((2, 4), 7)
    ids[1, 2] = 100_000
    with pytest.raises(ValueError, match=r"ids outside the vocabulary \[0, 512\): \[100000\]"):
        text_runtime.prefill(ids)


def test_empty_row_and_float_ids(text_runtime):
    with pytest.raises(ValueError, match=r"attention_mask rows \[1\] have no valid token"):
        text_runtime.prefill(torch.full((2, 4), 7), torch.tensor([[1, 1, 0, 0], [0, 0, 0, 0]]))
    with pytest.raises(TypeError, match=r"input_ids must be an int64/int32 torch.Tensor"):
        text_runtime.prefill(torch.full((2, 4), 7.0))


def test_image_placeholders_without_an_image_slot(text_runtime, tiny_model):
    ids = torch.full((2, 6), 7)
    ids[:, 2] = tiny_model.config.image_token_id
    with pytest.raises(ValueError, match=r"hold 2 image placeholder tokens, but the layout has no image slot"):
        text_runtime.prefill(ids)


def test_image_token_count_must_match_the_slot(image_setup):
    prompt, runtime = image_setup
    ids = prompt.input_ids.clone()
    ((start, count),) = prompt.image_slots
    ids[1, start] = 7  # one placeholder fewer in row 1
    with pytest.raises(
        ValueError,
        match=rf"row 1 holds {count - 1} image placeholder tokens in the image slot \[{start}, {start + count}\)",
    ):
        runtime.prefill(ids, prompt.attention_mask, prompt.pixel_values, prompt.image_position_ids)


def test_image_placeholders_must_fill_a_slot(image_setup, tiny_model):
    prompt, runtime = image_setup
    ids = prompt.input_ids.clone()
    ((start, count),) = prompt.image_slots
    ids[0, start : start + count + 1] = torch.cat((torch.tensor([7]), ids[0, start : start + count]))
    with pytest.raises(ValueError, match=rf"row 0 holds {count - 1} image placeholder tokens in the image slot"):
        runtime.prefill(ids, prompt.attention_mask, prompt.pixel_values, prompt.image_position_ids)
    ids = prompt.input_ids.clone()
    ids[0, start - 2] = tiny_model.config.image_token_id  # a stray placeholder before the slot
    with pytest.raises(
        ValueError, match=rf"row 0 holds image placeholders at {start - 2}\.\.{start - 2} outside the image slots"
    ):
        runtime.prefill(ids, prompt.attention_mask, prompt.pixel_values, prompt.image_position_ids)


def test_image_placeholders_need_pixel_values(image_setup):
    prompt, runtime = image_setup
    with pytest.raises(ValueError, match=r"2 image slots hold image placeholders: pixel_values and image_position_ids"):
        runtime.prefill(prompt.input_ids, prompt.attention_mask)


def test_one_image_per_slot_holding_placeholders(image_setup):
    """Two rows hold placeholders: two images, not one (HF's processor returns one per image)."""
    prompt, runtime = image_setup
    with pytest.raises(ValueError, match=r"pixel_values must be \(images=2: one per image slot holding placeholders"):
        runtime.prefill(prompt.input_ids, prompt.attention_mask, prompt.pixel_values[:1], prompt.image_position_ids[:1])


def test_image_must_give_the_slot_size(image_setup, tiny_model):
    prompt, _ = image_setup
    ((_, count),) = prompt.image_slots
    runtime = StaticGemma4Runtime(tiny_model, max_seq=90, batch_size=2, image_slots=[(3, count - 4)])
    ids = torch.full((2, 80), 7)
    ids[:, 3 : 3 + count - 4] = tiny_model.config.image_token_id
    with pytest.raises(
        ValueError,
        match=rf"the images of image slot 0 give \[{count}, {count}\] soft tokens, but the slot holds {count - 4}",
    ):
        runtime.prefill(ids, None, prompt.pixel_values, prompt.image_position_ids)


def test_pixel_values_for_a_text_only_model(e2b_model, image_setup):
    prompt, _ = image_setup
    runtime = StaticGemma4Runtime(e2b_model, max_seq=8)
    with pytest.raises(ValueError, match=r"pixel_values given, but this model has no vision tower"):
        runtime.prefill(torch.full((1, 4), 7), None, prompt.pixel_values[:1], prompt.image_position_ids[:1])
    with pytest.raises(ValueError, match=r"image slots need a model with a vision tower"):
        StaticGemma4Runtime(e2b_model, max_seq=8, visual_start_idx=1, num_visual_tokens=2)


def test_pixel_values_without_an_image_slot(text_runtime, image_setup):
    prompt, _ = image_setup
    with pytest.raises(ValueError, match=r"pixel_values given, but the layout has no image slot"):
        text_runtime.prefill(torch.full((2, 4), 7), None, prompt.pixel_values, prompt.image_position_ids)


def test_a_model_that_is_not_gemma4():
    with pytest.raises(
        TypeError, match=r"model must be a Gemma4ForConditionalGeneration or Gemma4ForCausalLM, got Linear"
    ):
        StaticGemma4Runtime(torch.nn.Linear(2, 2), max_seq=8)


def test_gemma4_unified_is_rejected_by_name():
    config = Gemma4UnifiedTextConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        vocab_size=64,
        layer_types=["sliding_attention", "full_attention"],
    )
    with pytest.raises(
        ValueError, match=r"gemma4_unified \(Gemma4UnifiedForCausalLM\) is not supported: .*encoder-free"
    ):
        StaticGemma4Runtime(Gemma4UnifiedForCausalLM(config), max_seq=8)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_seq": 0}, r"max_seq must be a positive int, got 0"),
        ({"max_seq": 8, "batch_size": 0}, r"batch_size must be a positive int, got 0"),
        ({"max_seq": 8, "image_slots": [(6, 4)]}, r"image_slots: the image slot \[6, 10\) does not fit in max_seq=8"),
        (
            {"max_seq": 8, "image_slots": [(-1, 4)]},
            r"image_slots: an image slot's start must be >= 0 and its tokens >= 1",
        ),
        ({"max_seq": 8, "image_slots": [(1, 0)]}, r"its tokens >= 1, got \(1, 0\)"),
        ({"max_seq": 16, "image_slots": [(4, 4), (2, 1)]}, r"in order and disjoint, .* starting at 2 begins before"),
        ({"max_seq": 16, "image_slots": [(2, 4), (5, 1)]}, r"in order and disjoint, .* starting at 5 begins before"),
        ({"max_seq": 16, "image_slots": [(2, 4)]}, r"vision_profile must give one profile per image slot \(1\)"),
        ({"max_seq": 16, "image_slots": [(2, 4)], "vision_profiles": (60,)}, r"vision_profile must be one of"),
    ],
)
def test_bad_layouts(kwargs, message):
    with pytest.raises(ValueError, match=message):
        StaticLayout(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"visual_start_idx": 2}, ValueError, r"visual_start_idx and num_visual_tokens must be given together"),
        (
            {"visual_start_idx": 2, "num_visual_tokens": 4, "image_slots": [(2, 4)]},
            ValueError,
            r"give image_slots or its one-slot shorthand visual_start_idx/num_visual_tokens, not both",
        ),
        ({"visual_start_idx": -1, "num_visual_tokens": 4}, ValueError, r"visual_start_idx/num_visual_tokens: an image"),
        ({"visual_start_idx": 6, "num_visual_tokens": 4}, ValueError, r"num_visual_tokens: the image slot \[6, 10\)"),
        ({"image_slots": 3}, TypeError, r"image_slots must be a sequence of \(start, tokens\) pairs, got 3"),
        ({"image_slots": [3, 4]}, TypeError, r"image_slots must give \(start, tokens\) pairs of ints, got 3"),
        ({"image_slots": [(1.0, 4)]}, TypeError, r"image_slots must give \(start, tokens\) pairs of ints"),
        ({"vision_profile": 70}, ValueError, r"vision_profile=70 is given, but the layout has no image slot"),
        ({"image_slots": [(1, 2), (4, 2)], "vision_profile": [70]}, ValueError, r"one profile per image slot \(2\)"),
    ],
)
def test_bad_image_slot_arguments(tiny_model, kwargs, error, message):
    with pytest.raises(error, match=message):
        StaticGemma4Runtime(tiny_model, max_seq=8, **kwargs)


def test_decode_past_max_seq_says_cache_is_full(tiny_model):
    runtime = StaticGemma4Runtime(tiny_model, max_seq=6, batch_size=2)
    runtime.prefill(torch.full((2, 5), 7), torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]]))
    runtime.decode_one(torch.full((2, 1), 7))  # row 0 fills slot 5, the last one
    with pytest.raises(ValueError, match=r"cache is full: rows \[0\] already hold max_seq=6 tokens"):
        runtime.decode_one(torch.full((2, 1), 7))


@pytest.mark.parametrize(
    ("next_ids", "error", "message"),
    [
        (torch.full((2,), 7), ValueError, r"next_ids must have shape \(batch_size, 1\) = \(2, 1\), got \(2,\)"),
        (torch.full((3, 1), 7), ValueError, r"next_ids must have shape \(batch_size, 1\)"),
        (torch.full((2, 1), 7.0), TypeError, r"next_ids must be an integer torch.Tensor"),
        (torch.full((2, 1), 512), ValueError, r"next_ids hold ids outside the vocabulary \[0, 512\)"),
    ],
)
def test_bad_decode_ids(text_runtime, next_ids, error, message):
    with pytest.raises(error, match=message):
        text_runtime.decode_one(next_ids)


def test_generate_never_writes_past_the_cache(text_runtime):
    ids = torch.full((2, 10), 7)
    with pytest.raises(ValueError, match=r"prompt length 10 \+ max_new_tokens 7 exceeds max_seq=16"):
        text_runtime.generate(ids, max_new_tokens=7)
    with pytest.raises(ValueError, match=r"max_new_tokens must be a positive int, got 0"):
        text_runtime.generate(ids, max_new_tokens=0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_seq": 16, "prefill_chunk": 5}, r"prefill_chunk=5 must divide max_seq=16"),
        ({"max_seq": 16, "prefill_chunk": 0}, r"prefill_chunk must be a positive int or None, got 0"),
        (
            {"max_seq": 16, "prefill_chunk": 4, "visual_start_idx": 2, "num_visual_tokens": 4},
            r"the image slot \[2, 6\) crosses a boundary of prefill_chunk=4",
        ),
    ],
)
def test_bad_prefill_chunks(tiny_model, kwargs, message):
    with pytest.raises(ValueError, match=message):
        StaticGemma4Runtime(tiny_model, **kwargs)


def test_cache_refuses_writes_past_max_seq(text_runtime):
    cache = text_runtime.cache
    layer = next(iter(cache.keys))
    key = torch.zeros(2, *cache.keys[layer].shape[1:2], 1, cache.keys[layer].shape[-1])
    with pytest.raises(
        ValueError, match=r"cache is full: writing position 16 but the static cache has max_seq=16 slots"
    ):
        cache.write(layer, key, key, torch.full((2, 1), 16), torch.ones(2, 1, dtype=torch.bool))


def test_reusing_layer_needs_the_producers_kv(text_runtime):
    layer = next(layer for layer in text_runtime.stages.layers if layer.reuses_kv)
    hidden, ple = torch.zeros(2, 1, 64), torch.zeros(2, 1, 16)
    cos = sin = torch.zeros(2, 1, layer.head_dim)
    with pytest.raises(ValueError, match=r"kv must be given to a layer that reuses K/V"):
        layer(hidden, ple, cos, sin, torch.zeros(2, 1, 1, 1))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"vision_profile": 100}, r"vision_profile must be one of \(70, 140, 280, 560, 1120\) and at least the slot"),
        ({"vision_profile": 70, "num_visual_tokens": 80}, r"at least the slot's tokens=80, got 70"),
        ({"vision_profile": [70, 140]}, r"vision_profile must give one profile per image slot \(1\), got \(70, 140\)"),
        (
            {"num_visual_tokens": 2000, "max_seq": 4096},
            r"an image slot of 2000 tokens exceeds the largest vision profile 1120",
        ),
    ],
)
def test_bad_vision_profiles(tiny_model, kwargs, message):
    options = {"max_seq": 128, "visual_start_idx": 2, "num_visual_tokens": 64, **kwargs}
    with pytest.raises(ValueError, match=message):
        StaticGemma4Runtime(tiny_model, **options)


def test_pixel_values_of_another_patch_size(image_setup):
    prompt, runtime = image_setup
    with pytest.raises(ValueError, match=r"pixel_values must be \(images=2: .*, patches, 3 \* patch_size\^2=48\)"):
        runtime.prefill(
            prompt.input_ids, prompt.attention_mask, prompt.pixel_values[..., :12], prompt.image_position_ids
        )


def test_decode_needs_a_prefill_first(tiny_model):
    runtime = StaticGemma4Runtime(tiny_model, max_seq=8, batch_size=1)
    with pytest.raises(ValueError, match=r"decode_one needs a prefill first"):
        runtime.decode_one(torch.full((1, 1), 7))
    runtime.prefill(torch.full((1, 3), 7))
    runtime.decode_one(torch.full((1, 1), 7))
    runtime.reset()
    with pytest.raises(ValueError, match=r"decode_one needs a prefill first"):
        runtime.decode_one(torch.full((1, 1), 7))
    assert int(runtime.cache.lengths.sum()) == 0


def test_a_failed_prefill_keeps_the_conversation(tiny_model):
    runtime = StaticGemma4Runtime(tiny_model, max_seq=8, batch_size=1)
    runtime.prefill(torch.full((1, 3), 7))
    with pytest.raises(ValueError, match=r"prompt length 9 is longer than max_seq=8"):
        runtime.prefill(torch.full((1, 9), 7))
    assert runtime.cache.lengths.tolist() == [3]
    runtime.decode_one(torch.full((1, 1), 7))  # still decodes after the earlier prompt


@pytest.mark.parametrize("eos_token_id", ["x", 1.5, [1, "2"], True, {1: 2}])
def test_bad_eos_token_id(text_runtime, eos_token_id):
    with pytest.raises(TypeError, match=r"eos_token_id must be None, an int or a list of ints, got"):
        text_runtime.generate(torch.full((2, 4), 7), max_new_tokens=2, eos_token_id=eos_token_id)


@pytest.mark.parametrize("eos_token_id", [-3, [1, -1], 10**9])
def test_eos_token_id_outside_the_vocabulary(text_runtime, eos_token_id):
    """An id no step can ever produce is refused, not accepted silently."""
    vocab = text_runtime.spec.vocab_size
    with pytest.raises(ValueError, match=rf"eos_token_id must be inside the vocabulary \[0, {vocab}\), got"):
        text_runtime.generate(torch.full((2, 4), 7), max_new_tokens=2, eos_token_id=eos_token_id)


def test_unknown_backend_and_a_missing_executorch_extra(tiny_model, monkeypatch):
    known = r"\('torch', 'torch-packed', 'executorch', 'executorch-stages', 'circle-stages'\)"
    with pytest.raises(ValueError, match=rf"backend must be one of {known}, got 'tpu'"):
        StaticGemma4Runtime(tiny_model, max_seq=8, backend="tpu")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ValueError, match=r"backend='executorch' needs the executorch extra"):
        StaticGemma4Runtime(tiny_model, max_seq=8, backend="executorch")
    with pytest.raises(
        ValueError,
        match=r"backend='circle-stages' needs the circle extra \(tico and onert not installed; onert has wheels",
    ):
        StaticGemma4Runtime(tiny_model, max_seq=8, backend="circle-stages")


def test_an_integer_scheme_on_circle_graphs_is_refused(tiny_model):
    with pytest.raises(ValueError, match=r"backend='circle-stages' runs float graphs .*, got quant='a8w8'"):
        StaticGemma4Runtime(tiny_model, max_seq=8, backend="circle-stages", quant="a8w8")
