"""The integer profiles' fixtures."""

from __future__ import annotations

import pytest

from gemma4_static import StaticGemma4Runtime
from gemma4_static.oracle.references.samples import image_prompt


@pytest.fixture(scope="module")
def tiny_runtime_and_prompt(tiny_model):
    """Two ragged rows with images, and this runtime at their length."""
    prompt = image_prompt(tiny_model.config, text_after=[6, 2])
    runtime = StaticGemma4Runtime(
        tiny_model, max_seq=prompt.input_ids.shape[1], batch_size=2, image_slots=list(prompt.image_slots)
    )
    return runtime, prompt
