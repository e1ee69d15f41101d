"""The fixtures of the runtime's own tests (its modules at the package's top: runtime, bundle; a
fixture that reads a test module's own constant takes it from ``request.module``)."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from gemma4_static import StaticGemma4Runtime
from gemma4_static.oracle.fuzz import FuzzTarget
from gemma4_static.oracle.options import VerifyOptions
from gemma4_static.oracle.references.samples import image_prompt
from gemma4_static.ports.static import StaticRuntimePort


@pytest.fixture(scope="module")
def runtime(request, tiny_model):
    """This runtime on the tiny model at the requesting module's ``MAX_SEQ`` and ``BATCH``."""
    return StaticGemma4Runtime(tiny_model, max_seq=request.module.MAX_SEQ, batch_size=request.module.BATCH)


@pytest.fixture(scope="module")
def runtimes(request, tiny_model):
    """Batch-2 decoders per prefill chunk length of the requesting module's ``CHUNKS`` (None = single
    shot) and a separate reference runtime for the extended-prompt prefills, built once for all examples."""
    max_seq = request.module.MAX_SEQ
    decoders = {
        chunk: StaticGemma4Runtime(tiny_model, max_seq=max_seq, batch_size=2, prefill_chunk=chunk)
        for chunk in request.module.CHUNKS
    }
    return decoders, StaticGemma4Runtime(tiny_model, max_seq=max_seq, batch_size=2)


@pytest.fixture(scope="module")
def models(request, tiny_model):
    """The tiny model under each of the requesting module's ``WINDOWS`` (the weights do not depend on the window)."""
    variants = {}
    for window in request.module.WINDOWS:
        model = copy.deepcopy(tiny_model)
        model.config.text_config.sliding_window = window
        variants[window] = model
    return variants


@pytest.fixture(scope="module")
def text_runtime(tiny_model):
    return StaticGemma4Runtime(tiny_model, max_seq=16, batch_size=2)


@pytest.fixture(scope="module")
def image_setup(tiny_model):
    """Two rows with images, and this runtime two positions past them."""
    prompt = image_prompt(tiny_model.config, text_after=[3, 2])
    runtime = StaticGemma4Runtime(
        tiny_model,
        max_seq=prompt.input_ids.shape[1] + 2,
        batch_size=2,
        image_slots=prompt.image_slots,
    )
    return prompt, runtime


@pytest.fixture(scope="module")
def targets(request, tiny_model):
    """One fuzz target per kind: this runtime at the requesting module's ``MAX_SEQ`` (the image kind:
    its prompt's length + 8, with its ``SECOND_IMAGE``), batch 2, both padding sides, keeping its
    conversation after a refused call. The three share HF's answers for text histories (the same
    model in float32: an answer is the history's, whichever port asked)."""
    max_seq, second_image = request.module.MAX_SEQ, request.module.SECOND_IMAGE
    layout = image_prompt(tiny_model.config, text_after=[3, 3], seed=1, then=second_image)

    def runtime(**options):
        return lambda setup: StaticRuntimePort(tiny_model, setup, **options)

    answers: dict = {}

    def target(build, max_seq, image_slots=()):
        base = FuzzTarget.of(tiny_model, VerifyOptions(max_seq=max_seq), build=build)
        return dataclasses.replace(
            base, paddings=("right", "left"), keeps_conversation=True, image_slots=image_slots, references=answers
        )

    return {
        "text": target(runtime(), max_seq),
        "text-full-layout": target(runtime(sliding_cache="full"), max_seq),
        "image": target(runtime(), layout.input_ids.shape[1] + 8, layout.image_slots),
    }
