"""The vision inputs' rows (the encoder's key-padding mask and its 2-D RoPE against HF's) in each
float profile: HF's tables are computed in the profile's dtype, as this runtime's are, so both agree
exactly (a table in another dtype than the profile's is an infinite failure, never a pass)."""

from __future__ import annotations

import pytest
import torch

from gemma4_static.oracle.checks import parity_vision
from gemma4_static.oracle.checks.parity_vision import vision_input_rows
from gemma4_static.oracle.references.samples import image_prompt


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
def test_the_vision_inputs_match_hf_exactly_in_the_profiles_dtype(tiny_model, dtype):
    prompt = image_prompt(tiny_model.config, text_after=[3])
    rows = vision_input_rows(tiny_model, prompt.image_position_ids, profile=70, dtype=dtype)
    assert [row.check.split(" vs ")[0] for row in rows] == ["encoder mask", "2-D RoPE cos", "2-D RoPE sin"]
    assert all(row.compared and row.value == 0 and not row.failed for row in rows), [(r.check, r.value) for r in rows]


def test_an_encoder_mask_of_another_shape_than_hfs_mismatches_every_entry(tiny_model, monkeypatch):
    """HF's mask one patch longer (stubbed): every entry of ours counts, none is broadcast against it."""
    prompt = image_prompt(tiny_model.config, text_after=[3])
    real = parity_vision.hf_vision_mask

    def one_patch_longer(model, image_position_ids):
        mask = real(model, image_position_ids)
        return torch.nn.functional.pad(mask, (0, 1, 0, 1), value=True)

    monkeypatch.setattr(parity_vision, "hf_vision_mask", one_patch_longer)
    mask_row = vision_input_rows(tiny_model, prompt.image_position_ids, profile=70, dtype=torch.float32)[0]
    batch, patches = prompt.image_position_ids.shape[:2]
    assert mask_row.value == batch * patches * patches and mask_row.failed
