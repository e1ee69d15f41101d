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
    # exact: the same HF forward on the same inputs in one process (float32, same kernels) is bit-identical
    torch.testing.assert_close(logits, tiny_model(**prompt.hf_kwargs()).logits[0], rtol=0, atol=0)
    without_image = tiny_model(input_ids=prompt.input_ids).logits[0]  # the same ids, no pixels
    # the image's soft tokens move the last logits by 31 here (at a scale of 24); float32 rounding moves
    # them by under 1e-3 (tolerances.RELATIVE: 2e-5 of the scale), so more than a logit is the image
    assert float((logits[-1] - without_image[-1]).abs().max()) > 1.0


def test_the_base_logits_of_a_text_prompt_are_hfs_over_it(tiny_model):
    prompt = text_prompt(tiny_model.config, [9], seed=3)
    # exact: HF's forward over the row's history, all of it valid, is this forward bit for bit (float32)
    torch.testing.assert_close(
        base_logits(tiny_model, prompt), tiny_model(input_ids=prompt.input_ids).logits[0], rtol=0, atol=0
    )
