"""Static prefill vs HF, stage by stage: inputs, embedding, PLE, vision, fusion, every decoder
layer, every producing layer's K/V, and last-token logits.

fp32 tolerance: each stage repeats HF's op sequence; what differs is the summation order inside
BLAS (other matrix shapes, since rows are padded to ``max_seq``) and HF's SDPA kernel vs our
explicit softmax. That is a few fp32 ulps per layer (observed ~2e-6 relative through all 35 E2B
layers), so hidden states and K/V must agree within ``2e-5 * max|HF|``.
"""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import Gemma4ForCausalLM, Gemma4TextConfig

from gemma4_static.models import tiny_config
from gemma4_static.reference import hf_prefill, paired_hidden_states, paired_kv
from gemma4_static.runtime import StaticGemma4Runtime
from gemma4_static.samples import image_prompt, text_prompt

RELATIVE_TOLERANCE = 2e-5


def _assert_close(name: str, ours: torch.Tensor, theirs: torch.Tensor, report) -> None:
    error = float((ours.float() - theirs.float()).abs().max())
    scale = float(theirs.float().abs().max())
    report(f"{name}: max abs diff {error:.3g} (max |HF| {scale:.3g})")
    assert error <= RELATIVE_TOLERANCE * max(scale, 1.0), f"{name}: {error} > {RELATIVE_TOLERANCE} * {scale}"


def _window(model) -> int:
    return model.config.get_text_config().sliding_window


def _text_case(model, batch: int):
    """A prompt longer than two windows (E2B: 1027 > 512) in row 0; rows 1, 2 ragged, right-padded."""
    longest = 2 * _window(model) + 3
    lengths = [longest, longest - 7, _window(model) // 2][:batch]
    prompt = text_prompt(model.config, lengths)
    return prompt, StaticGemma4Runtime(model, max_seq=longest + 5, batch_size=batch)


@pytest.fixture(scope="module")
def image_case(tiny_model):
    prompt = image_prompt(tiny_model.config, text_after=[9, 4, 1])
    runtime = StaticGemma4Runtime(
        tiny_model,
        max_seq=prompt.input_ids.shape[1] + 3,
        batch_size=3,
        **prompt.image_slot,
    )
    return (
        prompt,
        runtime,
        runtime.prefill_outputs(
            prompt.input_ids,
            prompt.attention_mask,
            prompt.pixel_values,
            prompt.image_position_ids,
            keep_intermediates=True,
        ),
        hf_prefill(tiny_model, prompt),
    )


def test_static_inputs_match_what_hf_sees(image_case):
    prompt, runtime, outputs, _ = image_case
    inputs, length = outputs.inputs, prompt.input_ids.shape[1]
    assert torch.equal(inputs.raw_ids[:, :length], prompt.input_ids)
    assert (inputs.raw_ids[:, length:] == runtime.pad_token_id).all()
    assert torch.equal(inputs.valid[:, :length], prompt.attention_mask.bool())
    assert not inputs.valid[:, length:].any()
    assert torch.equal(inputs.valid_length, prompt.attention_mask.sum(dim=1))
    assert torch.equal(inputs.mm_token_type_ids[:, :length], prompt.mm_token_type_ids)
    image_token = runtime.image_token_id
    expected_llm_ids = torch.where(prompt.input_ids == image_token, runtime.pad_token_id, prompt.input_ids)
    assert torch.equal(inputs.input_ids[:, :length], expected_llm_ids)  # HF's llm_input_ids


def test_token_embedding_is_exact(gemma4_model):
    prompt, runtime = _text_case(gemma4_model, batch=3)
    ids = runtime.build_inputs(prompt.input_ids, prompt.attention_mask).input_ids
    assert torch.equal(runtime.embedding(ids), gemma4_model.get_input_embeddings()(ids))


def test_per_layer_inputs_match_hf(image_case, tiny_model, report):
    _, _, outputs, _ = image_case
    language_model = tiny_model.model.language_model
    identity = language_model.get_per_layer_inputs(outputs.inputs.input_ids, None)
    fused = outputs.hidden_states[0]
    theirs = language_model.project_per_layer_inputs(fused, identity)
    assert outputs.per_layer_inputs.shape == theirs.shape  # (B, S, L, P)
    _assert_close("PLE", outputs.per_layer_inputs, theirs, report)


def test_vision_prefill_matches_get_image_features(image_case, tiny_model, report):
    prompt, _, outputs, _ = image_case
    pooled = tiny_model.model.get_image_features(prompt.pixel_values, prompt.image_position_ids).pooler_output
    theirs = torch.stack(pooled)
    assert outputs.soft_tokens.shape == theirs.shape == (3, prompt.num_visual_tokens, outputs.soft_tokens.shape[-1])
    _assert_close("vision prefill", outputs.soft_tokens, theirs, report)


def test_fixed_slot_fusion_equals_masked_scatter(image_case):
    _, _, outputs, _ = image_case
    embeds, soft = outputs.embeddings, outputs.soft_tokens
    is_image = outputs.inputs.mm_token_type_ids.bool()
    theirs = embeds.masked_scatter(is_image[..., None].expand_as(embeds), soft.reshape(-1, soft.shape[-1]))
    assert torch.equal(outputs.hidden_states[0], theirs)


def _compare_layers(model, outputs, hf, valid: torch.Tensor, report) -> None:
    """Each layer's output on valid positions, in order, so a failure names the first to diverge."""
    pairs = paired_hidden_states(model, outputs.hidden_states, hf.hidden_states, valid)
    errors = [float((mine - theirs).abs().max()) for mine, theirs in pairs]
    for index, ((_, theirs), error) in enumerate(zip(pairs, errors, strict=True)):
        name = "embeddings" if index == 0 else f"layer {index - 1}"
        scale = float(theirs.abs().max())
        assert error <= RELATIVE_TOLERANCE * max(scale, 1.0), f"{name} diverged first: {error} (max |HF| {scale})"
    worst = max(range(len(pairs)), key=errors.__getitem__)
    _assert_close(f"hidden states (worst: index {worst})", *pairs[worst], report)


def _compare_kv(runtime, hf, valid: torch.Tensor, report) -> None:
    """Producing layers' K/V vs HF's cache (see ``paired_kv`` for which positions HF keeps)."""
    pairs = paired_kv(runtime.cache, hf.cache, valid)
    for name, mine, theirs in pairs:
        error, scale = float((mine - theirs).abs().max()), float(theirs.abs().max())
        assert error <= RELATIVE_TOLERANCE * max(scale, 1.0), f"{name}: {error} (max |HF| {scale})"
    worst = max(float((mine - theirs).abs().max()) for _, mine, theirs in pairs)
    report(f"K/V of {len(pairs) // 2} producing layers vs HF cache: max abs diff {worst:.3g}")


@pytest.mark.parametrize("batch", [1, 3])
def test_text_prefill_matches_hf(gemma4_model, batch, report):
    prompt, runtime = _text_case(gemma4_model, batch)
    outputs = runtime.prefill_outputs(prompt.input_ids, prompt.attention_mask, keep_intermediates=True)
    hf = hf_prefill(gemma4_model, prompt)
    valid = prompt.attention_mask.bool()
    _compare_layers(gemma4_model, outputs, hf, valid, report)
    _compare_kv(runtime, hf, valid, report)
    theirs = hf.logits[torch.arange(batch), prompt.last_index]
    _assert_close("last-token logits", outputs.logits, theirs, report)
    assert torch.equal(outputs.logits.argmax(-1), theirs.argmax(-1))
    # without intermediates the K/V-reusing layers run for each row's last token only
    _assert_close(
        "last-token logits (reusing tail on the last token)",
        runtime.prefill(prompt.input_ids, prompt.attention_mask),
        theirs,
        report,
    )


def test_image_prefill_matches_hf(image_case, tiny_model, report):
    prompt, runtime, outputs, hf = image_case
    valid = prompt.attention_mask.bool()
    _compare_layers(tiny_model, outputs, hf, valid, report)
    _compare_kv(runtime, hf, valid, report)
    theirs = hf.logits[torch.arange(3), prompt.last_index]
    _assert_close("last-token logits (image)", outputs.logits, theirs, report)
    args = (prompt.input_ids, prompt.attention_mask, prompt.pixel_values, prompt.image_position_ids)
    _assert_close("last-token logits (image, reusing tail on the last token)", runtime.prefill(*args), theirs, report)


@pytest.fixture(scope="module", params=["tiny", "e2b-geometry"])
def bf16_pair(request):
    """(fp32 model, its bf16 copy): the session model and a converted copy of it."""
    model = request.getfixturevalue({"tiny": "tiny_model", "e2b-geometry": "e2b_model"}[request.param])
    return model, copy.deepcopy(model).to(torch.bfloat16)


def test_bf16_prefill_is_as_accurate_as_hf_bf16(bf16_pair, report):
    """bf16 has 8 bits of mantissa, so bf16 logits legitimately differ from HF's bf16 logits by
    rounding order alone; the meaningful checks are against the fp32 reference: our bf16 error must
    stay within twice HF's own bf16 error, and the argmax must agree with HF's wherever HF's top-2
    margin exceeds twice the observed difference."""
    model32, model16 = bf16_pair
    prompt, runtime = _text_case(model16, batch=3)
    rows = torch.arange(3)
    ours = runtime.prefill(prompt.input_ids, prompt.attention_mask).float()
    theirs = hf_prefill(model16, prompt).logits[rows, prompt.last_index].float()
    reference = hf_prefill(model32, prompt).logits[rows, prompt.last_index]
    difference = float((ours - theirs).abs().max())
    peir = difference / float(theirs.max() - theirs.min())
    our_error, hf_error = float((ours - reference).abs().max()), float((theirs - reference).abs().max())
    report(
        f"bf16 logits: max |ours - HF bf16| {difference:.3g}, PEIR {peir:.3g}; "
        f"vs fp32: ours {our_error:.3g}, HF bf16 {hf_error:.3g}"
    )
    assert our_error <= 2 * hf_error
    top2 = theirs.topk(2, dim=-1).values
    decisive = (top2[:, 0] - top2[:, 1]) > 2 * difference
    assert torch.equal(ours.argmax(-1)[decisive], theirs.argmax(-1)[decisive])


def test_attention_k_eq_v_variant_matches_hf(report):
    """The larger Gemma 4 geometry: full layers with K = V (no v_proj) and their own KV-head count."""
    text = tiny_config().text_config
    config = Gemma4TextConfig(
        **{
            name: getattr(text, name)
            for name in ("hidden_size", "intermediate_size", "num_hidden_layers", "layer_types")
        },
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        global_head_dim=64,
        num_global_key_value_heads=2,
        attention_k_eq_v=True,
        sliding_window=6,
        vocab_size=512,
        vocab_size_per_layer_input=512,
        hidden_size_per_layer_input=16,
        num_kv_shared_layers=4,
        final_logit_softcapping=30.0,
    )
    torch.manual_seed(0)
    model = Gemma4ForCausalLM(config).eval()
    assert model.model.layers[4].self_attn.v_proj is None
    prompt = text_prompt(config, [15, 9])
    runtime = StaticGemma4Runtime(model, max_seq=20, batch_size=2)
    theirs = hf_prefill(model, prompt).logits[torch.arange(2), prompt.last_index]
    _assert_close(
        "last-token logits (attention_k_eq_v)", runtime.prefill(prompt.input_ids, prompt.attention_mask), theirs, report
    )
