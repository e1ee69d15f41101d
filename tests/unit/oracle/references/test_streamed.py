"""HF in float64 without a float64 copy of the model (:mod:`~gemma4_static.oracle.references.streamed`):
the clone computes exactly what HF's model of the same checkpoint loaded in float64 computes
(bfloat16 weights up-cast are exact, and the embedding scales HF's init sets from a number hold
it in float64: the same float64 arithmetic, equal to the bit), shares the stored weights' storage,
holds one layer in float64 at a time, and leaves the model it was made from as it was. The
checkpoint is the E2B vision model (images through its tower) saved in bfloat16, as a real one is
stored, and loaded by HF."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from gemma4_static.oracle.references.hf import hf_greedy, hf_input_embeddings, hf_prefill
from gemma4_static.oracle.references.samples import image_prompt, text_prompt
from gemma4_static.oracle.references.streamed import (
    StreamingPlan,
    VocabularyChunkedHead,
    buffer_in,
    converted,
    streamed,
)
from tests.hf_tables import hf_scaled_table


def prompt_of(model):
    if getattr(model.config, "vision_config", None) is not None:
        return image_prompt(model.config, [5, 9])
    return text_prompt(model.config, [7, 12])


def test_streamed_float64_is_hf_loaded_in_float64_to_the_bit(stored, loaded_in):
    whole, clone = loaded_in(torch.float64), streamed(stored)
    prompt = prompt_of(stored)
    expected, got = hf_prefill(whole, prompt), hf_prefill(clone, prompt)
    assert got.logits.dtype == torch.float64
    assert torch.equal(got.logits, expected.logits)
    for mine, theirs in zip(got.hidden_states, expected.hidden_states, strict=True):
        assert torch.equal(mine, theirs)
    tokens, logits = hf_greedy(clone, prompt, max_new_tokens=4, eos_token_id=None)
    expected_tokens, expected_logits = hf_greedy(whole, prompt, max_new_tokens=4, eos_token_id=None)
    assert torch.equal(tokens, expected_tokens)
    assert torch.equal(logits, expected_logits)
    ids = prompt.input_ids.clamp_max(stored.config.get_text_config().vocab_size - 1)
    assert torch.equal(hf_input_embeddings(clone, ids), hf_input_embeddings(whole, ids))


def test_the_model_it_was_made_from_is_left_as_it_was(stored):
    before = {name: (tensor.dtype, tensor.data_ptr()) for name, tensor in stored.state_dict().items()}
    clone = streamed(stored)
    hf_prefill(clone, prompt_of(stored))
    assert {name: (tensor.dtype, tensor.data_ptr()) for name, tensor in stored.state_dict().items()} == before


def test_layers_tables_and_head_share_the_stored_weights(stored):
    clone = streamed(stored)
    plan = StreamingPlan.of(stored)
    stored_pointers = {parameter.data_ptr() for parameter in stored.parameters()}
    lazy = [parameter for owner in (*plan.layers, *plan.tables) for parameter in owner.parameters()]
    assert lazy, "the plan names no layer or table"
    clone_pointers = {parameter.data_ptr() for parameter in clone.parameters()}
    assert {parameter.data_ptr() for parameter in lazy} <= clone_pointers & stored_pointers
    assert isinstance(clone.lm_head, VocabularyChunkedHead)
    assert clone.lm_head.weight.data_ptr() == stored.lm_head.weight.data_ptr()
    float64 = sum(p.numel() for p in clone.parameters() if p.dtype == torch.float64)
    eager = sum(p.numel() for _, _, p in plan.eager_parameters(stored))
    assert float64 == eager  # between forwards, nothing but the up-cast-once part is float64


def test_one_layer_is_in_float64_at_a_time(stored):
    clone = streamed(stored)
    plan = StreamingPlan.of(clone)
    seen = []

    def count(layer, *_):
        others = [other for other in plan.layers if other is not layer]
        seen.append(
            (
                all(p.dtype == torch.float64 for p in layer.parameters()),
                sum(p.dtype == torch.float64 for other in others for p in other.parameters()),
            )
        )

    hooks = [layer.register_forward_pre_hook(count) for layer in plan.layers]
    try:
        hf_prefill(clone, prompt_of(stored))
    finally:
        for hook in hooks:
            hook.remove()
    assert len(seen) >= len(plan.layers) // 2  # the text layers at least (vision layers where there are images)
    assert seen == [(True, 0)] * len(seen)


def test_a_failing_forward_still_restores_the_stored_weights(stored):
    clone = streamed(stored)
    layer = StreamingPlan.of(clone).layers[0]
    stored_pointers = [p.data_ptr() for p in layer.parameters()]
    with pytest.raises(TypeError):
        layer()  # a call its forward refuses
    assert [p.data_ptr() for p in layer.parameters()] == stored_pointers


def test_chunked_head_is_the_linear_layer():
    weight = nn.Parameter(torch.randn(50, 8).to(torch.bfloat16), requires_grad=False)
    hidden = torch.randn(2, 3, 8, dtype=torch.float64)
    expected = torch.nn.functional.linear(hidden, weight.double())
    # each logit is the same 8-term float64 dot product, in the order the kernel's blocking gives it:
    # within 1e-12 of values about 3 (8 x 2^-53 x 3 ~ 3e-15); a chunk lost or misplaced is off by ~1
    for chunk in (1, 7, 50, 64):
        assert torch.allclose(VocabularyChunkedHead(weight, chunk)(hidden), expected, rtol=0, atol=1e-12), chunk


def test_streamed_refuses_what_it_cannot_stream(stored):
    with pytest.raises(ValueError, match=r"dtype must be a floating dtype, got torch\.int8"):
        streamed(stored, torch.int8)
    biased = copy.deepcopy(stored)
    biased.lm_head = nn.Linear(4, 6)
    with pytest.raises(ValueError, match=r"model\.lm_head must be an nn\.Linear without bias, got Linear"):
        streamed(biased)


def test_converted_is_the_model_itself_in_its_own_dtype(stored):
    assert converted(stored, torch.bfloat16) is stored


def test_converted_keeps_the_tables_the_head_does_not_read_and_computes_hf_loaded_in_float32(stored, loaded_in):
    """Every weight but the per-layer-embedding table is converted (the tied head with its table,
    still tied); that table stays in bfloat16, its storage shared, and a prefill in float32 is the
    one of HF's model loaded in float32 to the bit (a row converted alone is the converted row; the
    embedding scales are float32's sqrt(H), not bfloat16's)."""
    widened = converted(stored, torch.float32)
    kept = {name for name, p in widened.named_parameters() if p.dtype == torch.bfloat16}
    assert kept == {"model.embed_tokens_per_layer.weight"} or kept == {
        "model.language_model.embed_tokens_per_layer.weight"
    }, kept
    (name,) = kept
    assert widened.get_parameter(name).data_ptr() == stored.get_parameter(name).data_ptr()
    assert widened.lm_head.weight is widened.get_input_embeddings().weight  # still tied
    assert widened.lm_head.weight.dtype == torch.float32
    whole = loaded_in(torch.float32)
    prompt = prompt_of(stored)
    expected, got = hf_prefill(whole, prompt), hf_prefill(widened, prompt)
    assert torch.equal(got.logits, expected.logits)
    assert all(torch.equal(a, b) for a, b in zip(got.hidden_states, expected.hidden_states, strict=True))
    assert widened.get_parameter(name).dtype == torch.bfloat16  # outside a forward: the stored table
    assert {p.dtype for p in stored.parameters()} == {torch.bfloat16}


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_a_scale_set_from_a_number_is_that_number_in_the_dtype_not_the_stored_rounding(dtype):
    """E2B's token table scale sqrt(1536) is 39.25 in bfloat16: cast up it would stay 39.25 (every
    embedding 0.15% off); the streamed and converted models hold HF's number in ``dtype``, and look
    rows up as HF's table made in ``dtype`` does. (The embedded models' widths have exact roots.)"""
    scale = 1536**0.5
    weight = torch.randn(40, 6).to(torch.bfloat16)
    stored = hf_scaled_table(torch.bfloat16, weight, scale)
    assert float(stored.embed_scale) == 39.25
    made = hf_scaled_table(dtype, weight, scale)
    ids = torch.tensor([[3, 17, 0, 39]])
    for model in (streamed(stored, dtype), converted(stored, dtype)):
        assert model.embed_scale.dtype == dtype and float(model.embed_scale) == float(made.embed_scale)
        assert torch.equal(model(ids), made(ids))
    assert float(stored.embed_scale) == 39.25  # the stored model as it was


def test_a_scale_buffer_without_its_number_is_the_buffer_cast():
    """A module holding such a buffer but not the number it was set from (another class than HF's
    scaled table) keeps what it stored, cast to the dtype."""
    module = nn.Module()
    module.register_buffer("embed_scale", torch.tensor(39.25, dtype=torch.bfloat16))
    scale = buffer_in(module, "embed_scale", torch.float64)
    assert scale.dtype == torch.float64 and float(scale) == 39.25
