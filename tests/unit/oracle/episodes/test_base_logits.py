"""The grid's reference over its one-row base prompt: HF's logits at every position, the image's
soft tokens included where the prompt has an image (a low-precision profile scores every case
against them)."""

from __future__ import annotations

import torch

from gemma4_static.oracle.episodes.scores import base_logits
from gemma4_static.oracle.references.samples import image_prompt, text_prompt


def test_the_base_logits_are_hfs_over_the_prompt_with_its_image(tiny_model):
    prompt = image_prompt(tiny_model.config, text_after=[5], seed=3)
    logits = base_logits(tiny_model, prompt)
    length = prompt.input_ids.shape[1]
    assert logits.shape == (length, tiny_model.config.get_text_config().vocab_size)
    torch.testing.assert_close(logits, tiny_model(**prompt.hf_kwargs()).logits[0], rtol=0, atol=0)
    without_image = tiny_model(input_ids=prompt.input_ids).logits[0]  # the same ids, no pixels
    assert not torch.allclose(logits[-1], without_image[-1], atol=1e-3)


def test_the_base_logits_of_a_text_prompt_are_hfs_over_it(tiny_model):
    prompt = text_prompt(tiny_model.config, [9], seed=3)
    torch.testing.assert_close(
        base_logits(tiny_model, prompt), tiny_model(input_ids=prompt.input_ids).logits[0], rtol=0, atol=1e-6
    )
