"""The integer profiles' mechanics (``gemma4_static.quant``): scheme names, the fake-quantized
weights and activations, and the sites wrapped around the runtime's stages without touching HF."""

from __future__ import annotations

import pytest
import torch

from gemma4_static.oracle.references.samples import image_prompt
from gemma4_static.quant import SCHEMES, parse_scheme, quantize
from gemma4_static.quant.fake_quant import ActivationQuantizer, quantized_weight
from gemma4_static.quant.profile import PER_LAYER_INPUT, PROJECTIONS
from gemma4_static.runtime import StaticGemma4Runtime


@pytest.mark.parametrize(
    ("text", "bits"),
    [
        ("a16w8", (16, 8, None, None, None, False)),
        ("a8w8+e8", (8, 8, None, 8, None, False)),
        ("a16w4+e8+h8", (16, 4, 32, 8, 8, False)),
        ("8da4w", (8, 4, 32, None, 4, True)),  # ExecuTorch's recipes: the LM head among the linears
        ("8da8w+emb8", (8, 8, None, 8, 8, True)),
    ],
)
def test_scheme_names_say_the_bits(text, bits):
    scheme = parse_scheme(text)
    fields = (scheme.activation_bits, scheme.weight_bits, scheme.group_size, scheme.table_bits, scheme.head_bits)
    assert (*fields, scheme.dynamic) == bits
    assert scheme.name == text
    assert scheme.weight_qparams == ("hqq_scale_only" if scheme.dynamic else "minmax")


@pytest.mark.parametrize(
    ("text", "error", "message"),
    [
        ("a4w4", ValueError, r"quant scheme 'a4w4' has an unknown base 'a4w4'; expected one of \['a16w8'"),
        ("a16w8+h4", ValueError, r"quant scheme 'a16w8\+h4' has unknown or repeated options"),
        ("a16w8+e8+e8", ValueError, r"unknown or repeated options; expected some of \+e8, \+h8"),
        ("a16w8+emb8", ValueError, r"unknown or repeated options; expected some of \+e8, \+h8"),
        ("8da4w+e8", ValueError, r"quant scheme '8da4w\+e8' has unknown or repeated options; expected some of \+emb8"),
        (
            "8da2w",
            ValueError,
            r"unknown base '8da2w'; expected one of \['a16w8', 'a8w8', 'a16w4', '8da4w', '8da8w', 'a16w16t', 'a8w8t'\]",
        ),
        (8, TypeError, r"quant must be a scheme name such as 'a16w8', got int"),
    ],
)
def test_bad_scheme_names_are_clear_errors(text, error, message):
    with pytest.raises(error, match=message):
        parse_scheme(text)


@pytest.mark.parametrize(("bits", "group_size", "levels"), [(8, None, 256), (4, 32, 16), (4, 24, 16)])
def test_weights_take_at_most_2_to_the_bits_values_per_scale(bits, group_size, levels):
    """Symmetric: one scale per row, or per group of columns; each row or group holds at most
    ``2^bits`` distinct values, each within half a step of the float weight. A width that is no
    multiple of the group (64 / 24) gets one scale per row."""
    weight = torch.randn(6, 64, generator=torch.Generator().manual_seed(0))
    fake = quantized_weight(weight, bits, group_size)
    assert fake.shape == weight.shape and fake.dtype == weight.dtype
    width = group_size if group_size is not None and 64 % group_size == 0 else 64
    blocks, float_blocks = fake.reshape(-1, width), weight.reshape(-1, width)
    step = float_blocks.abs().amax(dim=1) / ((2**bits - 1) / 2)
    for block, reference, scale in zip(blocks, float_blocks, step, strict=True):
        assert torch.unique(block).numel() <= levels
        assert float((block - reference).abs().max()) <= float(scale) / 2 + 1e-6  # + float32 rounding
    assert not torch.equal(fake, weight)


def test_activations_use_the_calibrated_range_and_clamp_outside_it():
    quantizer = ActivationQuantizer(8)
    with pytest.raises(ValueError, match="no range yet: calibrate the runtime first"):
        quantizer(torch.zeros(3))
    with pytest.raises(ValueError, match="saw no calibration data"):
        quantizer.freeze()
    quantizer.observe(torch.tensor([-1.0, 3.0]))
    quantizer.freeze()
    inside = torch.linspace(-1, 3, 101)
    assert float((quantizer(inside) - inside).abs().max()) <= float(quantizer.scale) / 2 + 1e-6
    assert float(quantizer(torch.tensor([10.0]))) == pytest.approx(3.0, abs=float(quantizer.scale))
    assert torch.unique(quantizer(inside)).numel() <= 256


def _logits(runtime, prompt):
    inputs = (prompt.input_ids, prompt.attention_mask, prompt.pixel_values, prompt.image_position_ids)
    return runtime.prefill(*inputs)


def test_sites_wrap_the_runtime_not_hf(tiny_model, tiny_runtime_and_prompt):
    """Quantizing a runtime leaves HF's weights and modules as they were; every site in float
    reproduces the unquantized runtime bit for bit; quantized, every group changes the logits."""
    runtime, prompt = tiny_runtime_and_prompt
    before = {name: tensor.clone() for name, tensor in tiny_model.state_dict().items()}
    reference = _logits(runtime, prompt)
    fresh = StaticGemma4Runtime(
        tiny_model, max_seq=prompt.input_ids.shape[1], batch_size=2, image_slots=list(prompt.image_slots)
    )
    profile = quantize(fresh.modules, parse_scheme(SCHEMES[-1]))
    with pytest.raises(ValueError, match="no range yet: calibrate the runtime first"):
        _logits(fresh, prompt)
    profile.select(lambda site: False)
    assert torch.equal(_logits(fresh, prompt), reference)
    profile.calibrate(lambda: _logits(fresh, image_prompt(tiny_model.config, text_after=[6, 2], seed=5)))
    quantized = _logits(fresh, prompt)
    assert not torch.equal(quantized, reference)
    for name, tensor in tiny_model.state_dict().items():
        assert torch.equal(tensor, before[name]), name
    assert torch.equal(_logits(runtime, prompt), reference)
    assert profile.groups[:4] == ["embedding", "PLE", "vision", "layer 0"]
    assert profile.groups[-10:] == ["LM head", *PROJECTIONS, *PER_LAYER_INPUT]
    assert PROJECTIONS[0] == "q_proj" and PER_LAYER_INPUT == ("ple_gate", "ple_projection")
    for group in profile.groups:
        profile.only(group)
        assert not torch.equal(_logits(fresh, prompt), reference), group
    with pytest.raises(ValueError, match=r"group must be one of \['embedding'.*got 'layer 99'"):
        profile.only("layer 99")
    with pytest.raises(ValueError, match=r"state must be one of \('float', 'observe', 'quantized'\), got 'int8'"):
        profile.sites[0].set("int8")


def test_a_quantized_runtime_calibrates_before_it_runs(tiny_model):
    """``quant=`` on the runtime: a call before :meth:`calibrate` is a clear error, never a silent
    float run; after it the logits move off the float ones by the scheme's noise only."""
    prompt = image_prompt(tiny_model.config, text_after=[6, 2])
    setup = {"max_seq": prompt.input_ids.shape[1], "batch_size": 2, "image_slots": list(prompt.image_slots)}
    runtime = StaticGemma4Runtime(tiny_model, quant="a16w8", **setup)
    with pytest.raises(ValueError, match="calibrate the runtime first"):
        _logits(runtime, prompt)
    calibration = [image_prompt(tiny_model.config, text_after=[6, 2], seed=seed) for seed in (1, 2)]
    runtime.calibrate(lambda: [_logits(runtime, sample) for sample in calibration])
    quantized, reference = _logits(runtime, prompt), _logits(StaticGemma4Runtime(tiny_model, **setup), prompt)
    noise = float((quantized - reference).pow(2).sum() / reference.pow(2).sum())
    assert 0 < noise < 0.01  # above 20 dB: the tiny model's a16w8 logits sit near 28 dB


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"quant": "a16w8", "backend": "executorch"}, r"quant scheme 'a16w8' does not run on XNNPACK"),
        ({"quant": "a16w8", "backend": "executorch-stages"}, r"quant scheme 'a16w8' does not run on XNNPACK"),
        ({"quant": "int8"}, r"quant scheme 'int8' has an unknown base 'int8'"),
        ({"quant": "8da4w"}, r"quant scheme '8da4w' is dynamic \(activations ranged per token at run time: a port's"),
    ],
)
def test_bad_quant_options_are_clear_errors(tiny_model, options, message):
    with pytest.raises(ValueError, match=message):
        StaticGemma4Runtime(tiny_model, max_seq=16, **options)


def test_calibrating_a_float_runtime_is_a_clear_error(tiny_model):
    with pytest.raises(ValueError, match=r"calibrate needs a runtime built with quant=SCHEME .* got quant=None"):
        StaticGemma4Runtime(tiny_model, max_seq=16).calibrate(lambda: None)


def test_calibration_is_deterministic(tiny_model):
    """The same sample prompts give the same ranges, so two calibrated runtimes agree bit for bit."""
    prompt = image_prompt(tiny_model.config, text_after=[6, 2])
    setup = {"max_seq": prompt.input_ids.shape[1], "batch_size": 2, "image_slots": list(prompt.image_slots)}
    calibration = [image_prompt(tiny_model.config, text_after=[6, 2], seed=seed) for seed in (3, 4)]
    logits = []
    for _ in range(2):
        runtime = StaticGemma4Runtime(tiny_model, quant="a8w8+e8+h8", **setup)
        runtime.calibrate(lambda runtime=runtime: [_logits(runtime, sample) for sample in calibration])
        logits.append(_logits(runtime, prompt))
    assert torch.equal(*logits)
