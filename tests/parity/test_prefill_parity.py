"""Static prefill vs HF, stage by stage: inputs, embedding, PLE, vision, fusion, every decoder
layer, every producing layer's K/V, and last-token logits.

Tolerances (``tolerances.RELATIVE``): fp32 stage outputs within ``2e-5 * max(1, max|HF|)``: each
stage repeats HF's op sequence and only the summation order inside BLAS and the SDPA kernels
differs (rows are padded to ``max_seq``), a few fp32 ulps per layer (observed ~2e-6 relative
through all 35 E2B layers). Inputs, embedding and fusion are exact.
"""

from __future__ import annotations

import pytest
import torch
from transformers import Gemma4ForCausalLM, Gemma4TextConfig

from gemma4_static.oracle.checks import parity
from gemma4_static.oracle.references.hf import hf_prefill
from gemma4_static.oracle.references.models import tiny_text_fields
from gemma4_static.oracle.references.samples import text_prompt
from gemma4_static.oracle.results.report import Row, assert_rows_pass, merge
from gemma4_static.ports.static import StaticRuntimePort
from gemma4_static.runtime import StaticGemma4Runtime

FP32 = torch.float32


def _check(rows: list[Row], report, label: str) -> None:
    """Report the worst row and assert every row, naming the first that failed."""
    worst = merge(rows, rows[0].stage, label)
    report(f"{label}: {worst.metric} {worst.value:.3g} (tolerance {worst.tolerance:.3g})")
    assert_rows_pass(rows)


def _window(model) -> int:
    return model.config.get_text_config().sliding_window


def _text_case(model, batch: int):
    """Batch 1: one unpadded prompt longer than the window (E2B: 515 > 512). Batch 2 and more: a
    prompt longer than the window by a few more tokens (tiny: 15, past two windows of 6; E2B: 521),
    one shorter than the window, then one a few tokens shorter than the first (ragged,
    right-padded). Past the window, a single-shot prefill is the same computation at every length
    (the sliding mask and the ring written after it depend on distances only; the ring's wraps are
    checked over many windows in test_ring_parity.py), so E2B's rows stay near one window."""
    window = _window(model)
    longest = window + 3 if batch == 1 else window + 9
    lengths = [longest, window // 2, longest - 7][:batch]
    prompt = text_prompt(model.config, lengths)
    return prompt, StaticGemma4Runtime(model, max_seq=longest + 5, batch_size=batch)


def test_static_inputs_match_what_hf_sees(prefill_image_case, tiny_model):
    prompt, _, outputs, _ = prefill_image_case
    inputs = outputs.inputs
    assert_rows_pass([parity.static_input_row(prompt, inputs.input_ids, inputs.valid, tiny_model.config)])
    shorter = inputs.input_ids[:, :4], inputs.valid[:, :4]  # fewer slots than the prompt's tokens: all mismatch
    row = parity.static_input_row(prompt, *shorter, tiny_model.config)
    assert row.failed and row.value == prompt.input_ids.numel() and row.check == "ids, valid mask"


def test_token_embedding_is_exact(gemma4_model):
    prompt, runtime = _text_case(gemma4_model, batch=3)
    ids = runtime.build_inputs(prompt.input_ids, prompt.attention_mask).input_ids
    assert_rows_pass([parity.embedding_row(gemma4_model, StaticRuntimePort.around(runtime, gemma4_model.config), ids)])


def test_per_layer_inputs_match_hf(prefill_image_case, tiny_model, report):
    prompt, _, outputs, hf = prefill_image_case
    ids = parity.llm_input_ids(prompt, tiny_model.config)
    _check([parity.ple_row(tiny_model, ids, hf, outputs.per_layer_inputs, FP32)], report, "PLE")


def test_vision_prefill_matches_get_image_features(prefill_image_case, tiny_model, report):
    prompt, _, outputs, _ = prefill_image_case
    ((_, count),) = prompt.image_slots
    assert [tokens.shape[0] for tokens in outputs.soft_tokens] == [count] * 3
    _check([parity.vision_row(tiny_model, prompt, outputs.soft_tokens, FP32)], report, "vision prefill")


def test_fixed_slot_fusion_equals_masked_scatter(prefill_image_case):
    _, _, outputs, _ = prefill_image_case
    assert_rows_pass([parity.fusion_row(outputs)])


def _compare_prefill(model, runtime, outputs, hf, prompt, report, label: str) -> None:
    """Each layer's output in order, named by its layer (a failure names the first to diverge), every
    producing layer's K/V, and the last-token logits with their argmax."""
    valid = prompt.attention_mask.bool()
    states = parity.hidden_state_rows(outputs.hidden_states, hf, valid, FP32)
    layers = [f"layer {index}" for index in range(model.config.get_text_config().num_hidden_layers)]
    assert [row.check for row in states] == ["embeddings", *layers] and {row.stage for row in states} == {
        "decoder layers"
    }
    _check(states, report, f"hidden states{label}")
    kv = parity.kv_rows(StaticRuntimePort.around(runtime, model.config), model, prompt, FP32)
    _check(kv, report, f"K/V of {len(kv) // 2} producing layers vs HF cache{label}")
    theirs = hf.logits[torch.arange(valid.shape[0]), prompt.last_index]
    _check(parity.logits_rows(outputs.logits, theirs, FP32), report, f"last-token logits{label}")


@pytest.mark.parametrize("batch", [1, 2])
def test_text_prefill_matches_hf(gemma4_model, batch, report):
    prompt, runtime = _text_case(gemma4_model, batch)
    inputs = runtime.build_inputs(prompt.input_ids, prompt.attention_mask)
    outputs = runtime.prefill_outputs(inputs, keep_intermediates=True)
    hf = hf_prefill(gemma4_model, prompt)
    _compare_prefill(gemma4_model, runtime, outputs, hf, prompt, report, "")
    # without intermediates the K/V-reusing layers run for each row's last token only
    theirs = hf.logits[torch.arange(batch), prompt.last_index]
    ours = runtime.prefill(prompt.input_ids, prompt.attention_mask)
    _check(parity.logits_rows(ours, theirs, FP32), report, "last-token logits (reusing tail on the last token)")


def test_image_prefill_matches_hf(prefill_image_case, tiny_model, report):
    prompt, runtime, outputs, hf = prefill_image_case
    _compare_prefill(tiny_model, runtime, outputs, hf, prompt, report, " (image)")
    args = (prompt.input_ids, prompt.attention_mask, prompt.pixel_values, prompt.image_position_ids)
    theirs = hf.logits[torch.arange(3), prompt.last_index]
    rows = parity.logits_rows(runtime.prefill(*args), theirs, FP32)
    _check(rows, report, "last-token logits (image, reusing tail on the last token)")


def test_attention_k_eq_v_variant_matches_hf(report):
    """The larger Gemma 4 geometry: full layers with K = V (no v_proj) and their own KV-head count."""
    config = Gemma4TextConfig(**tiny_text_fields(), num_global_key_value_heads=2, attention_k_eq_v=True)
    torch.manual_seed(0)
    model = Gemma4ForCausalLM(config).eval()
    assert model.model.layers[4].self_attn.v_proj is None
    prompt = text_prompt(config, [15, 9])
    runtime = StaticGemma4Runtime(model, max_seq=20, batch_size=2)
    theirs = hf_prefill(model, prompt).logits[torch.arange(2), prompt.last_index]
    ours = runtime.prefill(prompt.input_ids, prompt.attention_mask)
    _check(parity.logits_rows(ours, theirs, FP32), report, "last-token logits (attention_k_eq_v)")
