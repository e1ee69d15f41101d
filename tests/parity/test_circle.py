"""This runtime on the ``circle-stages`` backend (every NPU stage a Circle graph converted by TICO and
run by ONE's runtime, onert), driven by the same glue, against HF: a ragged text batch across the
sliding window and the ring's wraps (prefill, decode steps, greedy generation) on the tiny model and
the E2B geometry, and an image prompt on the tiny model. A second edge runtime beside ExecuTorch's;
the nightly lane's (a graph per layer and mode: minutes of conversion with an empty cache; one graph
of each kind runs in the ports lane, ``tests/unit/circle/test_stage_graphs.py``).

Tolerances: the fp32 ones of the PyTorch backend (``tolerances.RELATIVE``); greedy tokens exactly.
onert's CPU kernels reduce in other orders, a few fp32 ulps per layer, like XNNPACK's."""

from __future__ import annotations

import pytest
import torch

from gemma4_static.circle.graphs import circle_missing
from gemma4_static.circle.stages import CircleStage
from gemma4_static.oracle.checks import parity
from gemma4_static.oracle.references.hf import hf_prefill
from gemma4_static.oracle.references.samples import image_prompt, text_prompt
from gemma4_static.oracle.results.report import assert_rows_pass, merge
from gemma4_static.ports.static import StaticRuntimePort
from gemma4_static.runtime import StaticGemma4Runtime

FP32 = torch.float32
pytestmark = [
    pytest.mark.ports,
    pytest.mark.nightly,
    pytest.mark.xdist_group("circle"),  # one worker converts the graphs (another would wait on its locks)
    pytest.mark.skipif(circle_missing() is not None, reason=f"Circle graphs need {circle_missing()}"),
]


@pytest.mark.parametrize("model", ["tiny_model", "e2b_model"])
def test_text_prefill_decode_and_generation_match_hf(model, request, report):
    """Rows of 9 and 4 tokens and 8 greedy steps: past the window and, on the tiny model (window 6),
    around the ring."""
    model = request.getfixturevalue(model)
    prompt = text_prompt(model.config, [9, 4], seed=12)
    runtime = StaticGemma4Runtime(model, max_seq=9 + 8, batch_size=2, backend="circle-stages")
    port = StaticRuntimePort.around(runtime, model.config)
    theirs = hf_prefill(model, prompt).logits[torch.arange(2), prompt.last_index]
    rows = parity.logits_rows(runtime.prefill(prompt.input_ids, prompt.attention_mask), theirs, FP32)
    tokens = torch.randint(3, 400, (2, 8), generator=torch.Generator().manual_seed(3))
    rows += parity.decode_rows(model, StaticRuntimePort.around(runtime, model.config), prompt, tokens, FP32)
    rows += parity.generation_rows(model, port, prompt, max_new_tokens=8)
    stages = [runtime.stages.embedding, *runtime.stages.layers, runtime.stages.lm_head]
    assert all(isinstance(stage, CircleStage) for stage in stages)
    graphs = sum(len(stage.graphs()) for stage in stages)
    worst = merge([row for row in rows if "logits" in row.check], "circle", "logits").value
    report(f"circle-stages: {graphs} graphs in onert, logits vs HF {worst:.3g}, 8 greedy tokens a row")
    assert_rows_pass(rows)


def test_an_image_prompt_matches_hf(tiny_model, report):
    prompt = image_prompt(tiny_model.config, text_after=[3, 1], seed=5)
    runtime = StaticGemma4Runtime(
        tiny_model,
        max_seq=prompt.input_ids.shape[1] + 2,
        batch_size=2,
        backend="circle-stages",
        image_slots=prompt.image_slots,
    )
    theirs = hf_prefill(tiny_model, prompt).logits[torch.arange(2), prompt.last_index]
    args = (prompt.input_ids, prompt.attention_mask, prompt.pixel_values, prompt.image_position_ids)
    rows = parity.logits_rows(runtime.prefill(*args), theirs, FP32)
    assert runtime.stages.vision.graphs() and all(fusion.graphs() for fusion in runtime.stages.fusions)
    report(f"circle-stages images: vision and fusion graphs in onert, logits vs HF {rows[0].value:.3g}")
    assert_rows_pass(rows)
