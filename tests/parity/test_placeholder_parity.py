"""Multimodal placeholder ids (image, video, audio) become the pad id on the LLM side wherever they
stand, as HF's ``Gemma4Model.forward`` does on every call: in the prompt's text outside the image
slot and when decode is fed one. Tolerance: ``tolerances.RELATIVE`` (fp32), greedy tokens exactly."""

from __future__ import annotations

import torch

import gemma4_static.runtime as runtime_module
from gemma4_static.oracle.checks import parity
from gemma4_static.oracle.references.hf import hf_prefill
from gemma4_static.oracle.references.samples import image_prompt
from gemma4_static.oracle.results.report import assert_rows_pass
from gemma4_static.ports.static import StaticRuntimePort
from gemma4_static.runtime import StaticGemma4Runtime


def _placeholders(model) -> list[int]:
    config = model.config
    return [config.image_token_id, config.video_token_id, config.audio_token_id]


def test_video_and_audio_ids_in_the_prompt_text_match_hf(tiny_model, report):
    prompt = image_prompt(tiny_model.config, text_after=[8, 5])
    ((start, count),) = prompt.image_slots
    after = start + count + 1  # past eoi
    ids = prompt.input_ids.clone()
    ids[0, after + 1], ids[0, after + 3], ids[1, 1] = (
        tiny_model.config.video_token_id,
        tiny_model.config.audio_token_id,
        tiny_model.config.video_token_id,
    )
    prompt = type(prompt)(**{**prompt.__dict__, "input_ids": ids})
    runtime = StaticGemma4Runtime(tiny_model, max_seq=ids.shape[1] + 6, batch_size=2, image_slots=prompt.image_slots)
    args = (prompt.input_ids, prompt.attention_mask, prompt.pixel_values, prompt.image_position_ids)
    inputs = runtime.build_inputs(prompt.input_ids, prompt.attention_mask)
    assert int((inputs.input_ids == runtime.spec.pad_token_id)[:, : ids.shape[1]].sum()) >= 3 + 2 * count
    theirs = hf_prefill(tiny_model, prompt).logits[torch.arange(2), prompt.last_index]
    rows = parity.logits_rows(runtime.prefill(*args), theirs, torch.float32)
    rows += parity.generation_rows(
        tiny_model, StaticRuntimePort.around(runtime, tiny_model.config), prompt, max_new_tokens=6
    )
    report(f"placeholders in the prompt text: logits {rows[0].value:.3g}")
    assert_rows_pass(rows)


def test_decode_fed_each_placeholder_id_matches_hf(tiny_model, report):
    prompt = image_prompt(tiny_model.config, text_after=[4, 2])
    image, video, audio = _placeholders(tiny_model)
    tokens = torch.tensor([[image, 7, video, audio, 9], [audio, image, 11, video, image]])
    runtime = StaticGemma4Runtime(
        tiny_model, max_seq=prompt.input_ids.shape[1] + 6, batch_size=2, image_slots=prompt.image_slots
    )
    runtime.prefill(prompt.input_ids, prompt.attention_mask, prompt.pixel_values, prompt.image_position_ids)
    rows = parity.decode_rows(
        tiny_model, StaticRuntimePort.around(runtime, tiny_model.config), prompt, tokens, torch.float32
    )
    report(f"decode fed placeholder ids: logits {max(row.value for row in rows):.3g}")
    assert_rows_pass(rows)


def test_mapping_only_image_ids_is_caught(tiny_model, monkeypatch):
    """The porting bug this fixes: only image placeholders mapped to pad (video/audio ids then hit
    their own embedding rows) makes decode diverge from HF."""
    image = tiny_model.config.image_token_id
    pad = tiny_model.config.text_config.pad_token_id
    monkeypatch.setattr(runtime_module, "llm_ids", lambda ids, placeholders, _: torch.where(ids == image, pad, ids))
    prompt = image_prompt(tiny_model.config, text_after=[4, 2])
    _, video, audio = _placeholders(tiny_model)
    runtime = StaticGemma4Runtime(
        tiny_model, max_seq=prompt.input_ids.shape[1] + 4, batch_size=2, image_slots=prompt.image_slots
    )
    runtime.prefill(prompt.input_ids, prompt.attention_mask, prompt.pixel_values, prompt.image_position_ids)
    rows = parity.decode_rows(
        tiny_model,
        StaticRuntimePort.around(runtime, tiny_model.config),
        prompt,
        torch.tensor([[video, 7], [audio, 9]]),
        torch.float32,
    )
    assert any(row.failed for row in rows)
