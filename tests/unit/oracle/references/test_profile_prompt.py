"""A one-row prompt in a port's fixed image profile: BOS where the profile has one, text up to each
image slot's ``boi``, the image (``boi``, the profile's soft-token placeholders, ``eoi``) at its
slot, then the text after; a profile whose soft-token count the model's processor does not give is
refused naming both counts."""

from __future__ import annotations

import pytest
import torch

from gemma4_static.oracle.references.samples import profile_prompt
from gemma4_static.ports.images import ImageProfile

PROFILE = ImageProfile("tiny 48x48", (48, 48), budget=70, soft_tokens=64, slots=(2, 70), bos=True)


def test_each_image_fills_its_slot_between_boi_and_eoi(tiny_model):
    config = tiny_model.config
    prompt = profile_prompt(config, PROFILE, 5)
    ids = prompt.input_ids[0]
    assert ids.shape == (70 + 64 + 1 + 5,) and int(ids[0]) == 2  # BOS
    for slot in PROFILE.slots:
        assert int(ids[slot - 1]) == config.boi_token_id and int(ids[slot + 64]) == config.eoi_token_id
        assert torch.all(ids[slot : slot + 64] == config.image_token_id)
    images = ids == config.image_token_id
    assert int(images.sum()) == 128 and prompt.pixel_values.shape[0] == 2 and bool(prompt.attention_mask.all())
    # each image's patch positions (x, y), row by row: resized to 64 x 64 at a budget of 70 soft tokens,
    # 16 x 16 patches of 4 pixels (pooled 2 x 2 into the 64), then the padding's -1 up to 4 x 70 patches
    grid = [[x, y] for y in range(16) for x in range(16)] + [[-1, -1]] * (280 - 256)
    assert prompt.pixel_values.shape == (2, 280, 48) and prompt.image_position_ids.tolist() == [grid, grid]
    torch.manual_seed(12345)  # the text is the seed's alone, whatever the global generator holds
    again, other = profile_prompt(config, PROFILE, 5), profile_prompt(config, PROFILE, 5, seed=1)
    assert torch.equal(again.input_ids, prompt.input_ids) and not torch.equal(other.input_ids, prompt.input_ids)


def test_a_profile_the_processor_does_not_give_is_refused(tiny_model):
    wrong = ImageProfile("tiny 48x48", (48, 48), budget=70, soft_tokens=63)
    with pytest.raises(ValueError, match="gives 64 soft tokens for \\(48, 48\\) at a budget of 70, not 63"):
        profile_prompt(tiny_model.config, wrong, 5)


def test_a_profile_without_bos_starts_with_its_text(tiny_model):
    """No BOS where the profile has none: the text before the first slot fills it from position 0."""
    config = tiny_model.config
    without = ImageProfile("tiny 48x48, no BOS", (48, 48), budget=70, soft_tokens=64, slots=(3,), bos=False)
    ids = profile_prompt(config, without, 2).input_ids[0]
    assert ids.shape == (2 + 1 + 64 + 1 + 2,) and int(ids[2]) == config.boi_token_id  # 2 text tokens, the image
    assert 2 not in ids[:2].tolist() and torch.all(ids[3:67] == config.image_token_id)  # no BOS (id 2) anywhere first
    assert int(ids[67]) == config.eoi_token_id
