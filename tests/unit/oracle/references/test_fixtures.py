"""The default models look trained: no learned tensor sits at an identity value (on such weights a
dropped norm weight, layer scalar, clamp or softcap changes nothing and the parity suite cannot see
it), and pre-cap logits reach beyond the final softcap."""

from __future__ import annotations

import torch

from gemma4_static.oracle.references.samples import image_prompt, processed_images, text_prompt
from gemma4_static.oracle.references.trained import _calibrate_clip_bounds

# Buffers derived from the config, not learned: the embedding scales are sqrt(H) and sqrt(P).
DERIVED_FROM_CONFIG = ("embed_scale",)
SINGLE_VALUE_IDENTITY = {"layer_scalar": 1.0}  # a one-element learned tensor must not keep its init


def identity_valued(model: torch.nn.Module) -> list[str]:
    """Names of learned tensors that are constant (several elements), infinite, or still at their
    init value (single elements)."""
    found = []
    for name, tensor in (*model.named_parameters(), *model.named_buffers()):
        if name.endswith(DERIVED_FROM_CONFIG) or not tensor.is_floating_point():
            continue
        values = tensor.detach().float().flatten()
        if not torch.isfinite(values).all():
            found.append(f"{name} (not finite)")
        elif values.numel() > 1 and bool((values == values[0]).all()):
            found.append(f"{name} (every element {float(values[0])})")
        elif values.numel() == 1 and SINGLE_VALUE_IDENTITY.get(name.rsplit(".", 1)[-1]) == float(values[0]):
            found.append(f"{name} (init value {float(values[0])})")
    return found


def test_no_learned_tensor_is_constant(default_model):
    assert identity_valued(default_model) == []


def test_the_check_sees_an_identity_norm(tiny_model):
    """The check itself can fail: one RMSNorm weight reset to ones is reported by name."""
    norm = tiny_model.model.language_model.layers[3].post_feedforward_layernorm.weight
    saved = norm.clone()
    try:
        norm.fill_(1.0)
        assert identity_valued(tiny_model) == [
            "model.language_model.layers.3.post_feedforward_layernorm.weight (every element 1.0)"
        ]
    finally:
        norm.copy_(saved)


def test_pre_cap_logits_reach_beyond_the_softcap(default_model, report):
    """A missing or misplaced final softcap (30) must move logits by far more than any tolerance."""
    config = default_model.config
    cap = config.get_text_config().final_logit_softcapping
    has_vision = getattr(config, "vision_config", None) is not None
    prompt = image_prompt(config, text_after=[5, 2], seed=3) if has_vision else text_prompt(config, [40, 17], seed=3)
    seen = []
    hook = default_model.lm_head.register_forward_hook(lambda module, args, output: seen.append(output))
    try:
        default_model(**prompt.hf_kwargs())
    finally:
        hook.remove()
    valid = prompt.attention_mask.bool()
    largest = float(seen[0][valid].abs().max())
    report(f"largest pre-cap logit {largest:.1f} (softcap {cap})")
    # the fixtures put the largest pre-cap logit of their calibration prompt at 1.5x the cap (other
    # prompts: 1.3x to 1.75x); at 1.25x the cap still moves that logit by 11 (tanh(1.25) x 30 = 25.4)
    assert largest > 1.25 * cap


def test_the_clip_bounds_are_calibrated_on_the_images_patches_alone(tiny_model):
    """What a padding patch feeds the clipped linears moves no bound: calibrated on the same images
    with their padding patches' pixels 0 and 1000, every bound is the same (each run from the same
    bounds; the fixture's own are put back)."""
    images = processed_images(tiny_model.config, [(48, 48), (40, 72)], seed=0)
    pixels, positions = images["pixel_values"], images["image_position_ids"]
    padding = (positions == -1).all(dim=-1)
    assert padding.any(), "the second image's patches must leave padding"
    bounds = {name: tensor for name, tensor in tiny_model.named_buffers() if name.endswith(("_min", "_max"))}
    assert bounds, "the tiny vision tower has clipped linears"
    original = {name: tensor.clone() for name, tensor in bounds.items()}
    calibrated = []
    try:
        for fill in (0.0, 1000.0):
            with torch.no_grad():
                for name, tensor in bounds.items():
                    tensor.copy_(original[name])
                _calibrate_clip_bounds(tiny_model, pixels.masked_fill(padding[..., None], fill), positions)
            calibrated.append({name: tensor.clone() for name, tensor in bounds.items()})
    finally:
        with torch.no_grad():
            for name, tensor in bounds.items():
                tensor.copy_(original[name])
    assert any(not torch.equal(calibrated[0][name], original[name]) for name in bounds)  # calibration moved them
    assert all(torch.equal(calibrated[0][name], calibrated[1][name]) for name in bounds)
