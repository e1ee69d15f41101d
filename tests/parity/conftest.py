"""The fixtures of this runtime's parity tests against HF: the runtimes, prompts and programs the
tests of this folder share (a fixture that reads a test module's own constant takes it from
``request.module``)."""

from __future__ import annotations

import copy
import os

import pytest

from gemma4_static import StaticGemma4Runtime
from gemma4_static.bundle import export_bundle
from gemma4_static.executorch.step_inputs import prefill_method_tokens
from gemma4_static.oracle.numerics.gates import GATES
from gemma4_static.oracle.numerics.kernel_sets import KERNEL_SETS, MARKER
from gemma4_static.oracle.references.hf import hf_prefill
from gemma4_static.oracle.references.models import build_default_model
from gemma4_static.oracle.references.samples import image_prompt, processed_images, text_prompt
from tests.parity.edge_layout import BACKEND_PARAMS, BACKENDS, BATCH, edge_image_case


@pytest.fixture(scope="module")
def prefill_image_case(tiny_model):
    """Three ragged rows with images prefilled on this runtime (intermediates kept) and on HF."""
    prompt = image_prompt(tiny_model.config, text_after=[9, 4, 1])
    runtime = StaticGemma4Runtime(
        tiny_model,
        max_seq=prompt.input_ids.shape[1] + 3,
        batch_size=3,
        image_slots=prompt.image_slots,
    )
    return (
        prompt,
        runtime,
        runtime.prefill_outputs(
            runtime.build_inputs(prompt.input_ids, prompt.attention_mask),
            prompt.pixel_values,
            prompt.image_position_ids,
            keep_intermediates=True,
        ),
        hf_prefill(tiny_model, prompt),
    )


@pytest.fixture(scope="module")
def edge_case(tiny_model):
    """The ExecuTorch lane's image prompt and ``max_seq`` (:mod:`.edge_layout`)."""
    return edge_image_case(tiny_model.config)


@pytest.fixture(scope="module")
def edge_runtimes(tiny_model, edge_case):
    """A runtime on each ExecuTorch backend, batch 2, at the image runtime's shapes (so both share
    their programs)."""
    return {
        backend: StaticGemma4Runtime(tiny_model, max_seq=edge_case[1], batch_size=BATCH, backend=backend)
        for backend in BACKENDS
    }


@pytest.fixture(scope="module")
def text_prompt_near_window(tiny_model):
    """A ragged batch-2 prompt ending near the window (6)."""
    return text_prompt(tiny_model.config, [9, 4], seed=12)


@pytest.fixture(params=BACKEND_PARAMS)
def text_setup(request, edge_runtimes, text_prompt_near_window):
    return text_prompt_near_window, edge_runtimes[request.param], request.param


@pytest.fixture(scope="session")
def bundle(tiny_model, tmp_path_factory):
    """The tiny model's bundle at the lane's layout (batch 2, its ``max_seq``; window 6 < max_seq, so
    sliding layers keep a ring; the program the lane's text runtimes lowered, read from the cache),
    its ``prefill`` method's length, and the runtime it was written from."""
    runtime = StaticGemma4Runtime(tiny_model, max_seq=edge_image_case(tiny_model.config)[1], batch_size=BATCH)
    folder = tmp_path_factory.mktemp("bundle")
    export_bundle(runtime, folder)
    return folder, prefill_method_tokens(runtime.layout), runtime


@pytest.fixture(scope="module")
def export_setup(request, tiny_model):
    """Two image slots of different sizes and vision profiles (64 soft tokens at 70, 121 at 140), at
    the requesting module's ``MAX_SEQ``."""
    prompt = image_prompt(tiny_model.config, text_after=[3], then=((2, (48, 48), 140),))
    runtime = StaticGemma4Runtime(tiny_model, max_seq=request.module.MAX_SEQ, image_slots=prompt.image_slots)
    return runtime, {"pixel_values": prompt.pixel_values, "image_position_ids": prompt.image_position_ids}


@pytest.fixture(scope="module")
def tester_model():
    return build_default_model("hf-tester")


@pytest.fixture(scope="module")
def vision_tester_model():
    return build_default_model("hf-vision-tester")


@pytest.fixture(params=list(KERNEL_SETS))
def kernel_set(request: pytest.FixtureRequest):
    kernel_set = KERNEL_SETS[request.param]
    reason = kernel_set.unsupported()
    if reason is not None:
        pytest.skip(reason)
    if kernel_set.name == os.environ.get(MARKER, "native"):
        pytest.skip(f"this run itself runs under kernel set {kernel_set.name}: its own numerics lane covers it")
    return kernel_set


@pytest.fixture(scope="module")
def tiny_low_precision(tiny_model):
    """The tiny model in each low-precision profile."""
    return {dtype: copy.deepcopy(tiny_model).to(dtype) for dtype in GATES}


@pytest.fixture
def images(request, vision_model):
    """The requesting module's ``IMAGE_SETS[name]`` through HF's image processor, the set's ``name``
    given by the test (``parametrize("images", IMAGE_SETS, indirect=True)``)."""
    return processed_images(vision_model.config, request.module.IMAGE_SETS[request.param], seed=3)
