"""The independent vision stage vs HF's vision tower, sub-stage by sub-stage, on both multimodal
models, for images of several sizes and aspect ratios (so padded patches vary), then prefill
logits and greedy tokens with the image slot at several offsets.

Tolerances: the encoder mask exactly; the 2-D RoPE within ``tolerances.ROPE`` (both sides take the
cos/sin of the same fp32 angles; observed 0); stage outputs within ``tolerances.RELATIVE`` (fp32:
the same op sequence, at most summation-order noise; observed 0, since the static shapes equal
HF's); greedy tokens exactly.
"""

from __future__ import annotations

import pytest
import torch

from gemma4_static.cpu import vision as cpu_vision
from gemma4_static.npu.vision import ClippedProjection, VisionEncoder, VisionEncoderLayer
from gemma4_static.oracle.checks import parity
from gemma4_static.oracle.checks.parity_vision import vision_input_rows, vision_stage_rows
from gemma4_static.oracle.references.hf import hf_prefill
from gemma4_static.oracle.references.samples import image_prompt, processed_images
from gemma4_static.oracle.results.report import assert_rows_pass, merge
from gemma4_static.ports.static import StaticRuntimePort
from gemma4_static.runtime import StaticGemma4Runtime

FP32 = torch.float32
IMAGE_SETS = {
    "square": [(48, 48)],
    "mixed-aspect": [(48, 48), (40, 72), (96, 32)],
    "tall-and-wide": [(200, 24), (24, 200)],
}


@pytest.mark.parametrize("images", IMAGE_SETS, indirect=True)
def test_vision_inputs_match_hf(vision_model, images):
    """Encoder key-padding mask (exact) and axial 2-D RoPE from ``image_position_ids`` alone."""
    ids = images["image_position_ids"]
    assert (ids == -1).all(dim=-1).any() or len(ids) == 1  # padded patches are exercised
    assert_rows_pass(vision_input_rows(vision_model, ids, profile=70, dtype=FP32))


@pytest.mark.parametrize("images", IMAGE_SETS, indirect=True)
def test_vision_stage_matches_hf(vision_model, images, report):
    rows = vision_stage_rows(vision_model, images["pixel_values"], images["image_position_ids"], profile=70, dtype=FP32)
    worst = merge(rows, "vision prefill", "all")
    counts = images["num_soft_tokens_per_image"].tolist()
    report(f"vision stage ({counts} soft tokens): {len(rows)} sub-stages, worst {worst.value:.3g}")
    assert_rows_pass(rows)
    layers = vision_model.config.vision_config.num_hidden_layers
    assert {row.stage for row in rows} == {"vision prefill"} and len(rows) == layers + 3  # each layer its row


def _prefill_and_generation_rows(model, prompt, **runtime_options) -> list:
    """Last-token logits of a batch-2 image prompt and 6 greedy tokens, the runtime against HF."""
    runtime = StaticGemma4Runtime(
        model, max_seq=prompt.input_ids.shape[1] + 6, batch_size=2, image_slots=prompt.image_slots, **runtime_options
    )
    args = (prompt.input_ids, prompt.attention_mask, prompt.pixel_values, prompt.image_position_ids)
    theirs = hf_prefill(model, prompt).logits[torch.arange(2), prompt.last_index]
    rows = parity.logits_rows(runtime.prefill(*args), theirs, FP32)
    return rows + parity.generation_rows(
        model, StaticRuntimePort.around(runtime, model.config), prompt, max_new_tokens=6
    )


@pytest.mark.parametrize(("text_before", "image_size"), [(1, (48, 48)), (6, (40, 72))])
def test_image_prefill_and_generation_match_hf(vision_model, text_before, image_size, report):
    """The image slot at different offsets, ragged rows: last-token logits and 6 greedy tokens."""
    prompt = image_prompt(vision_model.config, text_after=[5, 2], text_before=text_before, image_size=image_size)
    rows = _prefill_and_generation_rows(vision_model, prompt)
    ((start, count),) = prompt.image_slots
    report(f"image at {start}, {count} soft tokens: logits {rows[0].value:.3g}")
    assert_rows_pass(rows)


@pytest.mark.parametrize("profile", [140, 280])
def test_images_at_fewer_patches_than_the_profile_match_hf(vision_model, profile, report):
    """Images processed at 70 soft tokens (HF runs them at their own patch count) in a runtime whose
    vision stage is static at a larger profile: the runtime pads the patches on the CPU side;
    logits and greedy tokens equal HF's on the unpadded input."""
    prompt = image_prompt(vision_model.config, text_after=[5, 2], image_size=(40, 72))
    kernel = vision_model.config.vision_config.pooling_kernel_size
    assert prompt.pixel_values.shape[1] < profile * kernel**2  # really padded on our side
    rows = _prefill_and_generation_rows(vision_model, prompt, vision_profile=profile)
    report(f"{prompt.pixel_values.shape[1]} patches at profile {profile}: logits vs HF {rows[0].value:.3g}")
    assert_rows_pass(rows)


@pytest.mark.parametrize("with_image", [[True, False], [False, True], [False, False]], ids=["1+text", "text+1", "text"])
def test_rows_whose_slot_holds_text_match_hf(vision_model, with_image, report):
    """A runtime with an image slot serves batches with fewer images than rows (the other rows hold
    text in the slot: no bidirectional block, no soft tokens) and prompts without any image; HF gets
    the same batch with one ``pixel_values`` entry per image."""
    prompt = image_prompt(vision_model.config, text_after=[5, 2], with_image=with_image, seed=4)
    rows = _prefill_and_generation_rows(vision_model, prompt)
    report(f"images in rows {with_image}: logits vs HF {rows[0].value:.3g}")
    assert_rows_pass(rows)


def test_an_image_with_more_patches_than_the_profile_is_refused(vision_model):
    big = image_prompt(vision_model.config, text_after=[1], image_size=(40, 72))
    images = processed_images(vision_model.config, [(400, 400)], profile=140)
    runtime = StaticGemma4Runtime(
        vision_model, max_seq=big.input_ids.shape[1] + 2, batch_size=1, image_slots=big.image_slots
    )
    patches = int((images["image_position_ids"] != -1).any(dim=-1).sum())
    with pytest.raises(ValueError, match=rf"an image has {patches} patches .* vision profile of 70 soft tokens"):
        runtime.prefill(big.input_ids, big.attention_mask, images["pixel_values"], images["image_position_ids"])


def _swap_rope_axes(monkeypatch):
    original = cpu_vision.vision_rope
    monkeypatch.setattr(
        cpu_vision, "vision_rope", lambda spec, positions, dtype: original(spec, positions.flip(-1), dtype)
    )


def _swap_position_embeddings(monkeypatch):
    original = VisionEncoder.embed_patches
    monkeypatch.setattr(
        VisionEncoder,
        "embed_patches",
        lambda self, pixels, positions, padding: original(self, pixels, positions.flip(-1), padding),
    )


def _drop_clamps(monkeypatch):
    monkeypatch.setattr(ClippedProjection, "forward", lambda self, x: self.linear(x))


def _pool_by_the_wrong_width(monkeypatch):
    original = cpu_vision.pooling_matrix
    monkeypatch.setattr(
        cpu_vision,
        "pooling_matrix",
        lambda positions, padding, kernel, tokens: original(positions.flip(-1), padding, kernel, tokens),
    )


def _drop_the_norm_weight_of_q(monkeypatch):
    original = VisionEncoderLayer.__init__

    def init(self, weights, spec):
        original(self, weights, spec)
        self.q_norm = torch.nn.Parameter(torch.ones_like(self.q_norm), requires_grad=False)

    monkeypatch.setattr(VisionEncoderLayer, "__init__", init)


@pytest.mark.parametrize(
    ("fault", "first_failure"),
    [
        (_swap_rope_axes, "2-D RoPE cos"),
        (_swap_position_embeddings, "patch embeddings"),
        (_drop_clamps, "encoder layer 0"),
        (_pool_by_the_wrong_width, "pooled"),
        (_drop_the_norm_weight_of_q, "encoder layer 0"),
    ],
    ids=["rope-axes-swapped", "position-embeddings-swapped", "no-clamps", "pooling-width", "q-norm-weight-dropped"],
)
def test_the_vision_checks_catch_porting_bugs(e2b_vision_model, monkeypatch, fault, first_failure):
    """Both sides agree to the last bit on the fixtures, so each check is shown to fail, at the
    sub-stage where the bug sits, when a realistic porting bug is injected (the fixture weights
    look trained: per-element norms, a random position table, calibrated clip bounds)."""
    images = processed_images(e2b_vision_model.config, IMAGE_SETS["mixed-aspect"], seed=3)
    fault(monkeypatch)
    ids = images["image_position_ids"]
    rows = vision_input_rows(e2b_vision_model, ids, profile=70, dtype=FP32)
    rows += vision_stage_rows(e2b_vision_model, images["pixel_values"], ids, profile=70, dtype=FP32)
    failed = [row for row in rows if row.failed]
    assert failed, "the injected bug went unnoticed"
    assert failed[0].check.startswith(first_failure), failed[0]
    assert rows[-1].failed  # and it reaches the soft tokens


def test_one_mismatched_entry_of_the_encoder_mask_fails_its_row(e2b_vision_model, monkeypatch):
    """The encoder mask is judged exactly: HF's answer with one entry flipped is one mismatch, a FAIL."""
    from gemma4_static.oracle.checks import parity_vision

    original = parity_vision.hf_vision_mask

    def one_flipped(model, image_position_ids):
        mask = original(model, image_position_ids).clone()
        mask[0, 0, 0, -1] = ~mask[0, 0, 0, -1]
        return mask

    monkeypatch.setattr(parity_vision, "hf_vision_mask", one_flipped)
    ids = processed_images(e2b_vision_model.config, IMAGE_SETS["mixed-aspect"], seed=3)["image_position_ids"]
    mask_row = vision_input_rows(e2b_vision_model, ids, profile=70, dtype=FP32)[0]
    assert mask_row.check == "encoder mask vs create_bidirectional_mask"
    assert (mask_row.value, mask_row.tolerance, mask_row.status) == (1, 0.0, "FAIL")
