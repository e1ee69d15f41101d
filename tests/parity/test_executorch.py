"""The runtime on ExecuTorch, driven by the same glue, checked against HF on the tiny model (ragged
text across the sliding window and the ring's wraps, and two image slots of different profiles) in
both forms: ``executorch`` (the default: the text model as one program, the KV cache inside it,
images entering it as embeddings from the vision and fusion programs) and ``executorch-stages``
(every NPU stage its own program, the cache passed in and out).

Tolerances: the fp32 ones of the PyTorch backend (``tolerances.RELATIVE``); greedy tokens exactly.
Measured: XNNPACK's kernels reduce in other orders, a few fp32 ulps per layer, like SDPA vs eager.
"""

from __future__ import annotations

import gc

import pytest
import torch

pytest.importorskip("executorch", reason="the executorch extra is not installed (pip install '.[executorch]')")

from gemma4_static.executorch.program_cache import forget_programs
from gemma4_static.executorch.stage_programs import EdgeStage
from gemma4_static.oracle.checks import parity
from gemma4_static.oracle.faults.catalogue import faults_named
from gemma4_static.oracle.faults.self_test import format_result, run_fault
from gemma4_static.oracle.options import VerifyOptions
from gemma4_static.oracle.references.hf import hf_decode_logits, hf_prefill
from gemma4_static.oracle.results.report import assert_rows_pass, merge
from gemma4_static.ports.static import StaticRuntimePort
from gemma4_static.runtime import StaticGemma4Runtime
from gemma4_static.stack import LayerStack
from tests.parity.edge_layout import BACKEND_PARAMS, EDGE_GROUP

FP32 = torch.float32
# one worker lowers the lane's programs (two workers would each build the module's edge_runtimes, one
# lowering while the other waits on the program's lock); test_bundle.py reads the text program there
pytestmark = [pytest.mark.executorch, pytest.mark.xdist_group(EDGE_GROUP)]


def test_every_stage_is_an_executorch_program(text_setup, report):
    _, runtime, backend = text_setup
    stages = [runtime.stages.embedding, runtime.stages.per_layer_inputs, *runtime.stages.layers, runtime.stages.lm_head]
    assert all(isinstance(stage, EdgeStage) for stage in stages)
    assert runtime.modules.embedding is runtime.stages.embedding.module  # the same weights, lowered
    assert (runtime.program is not None) == (backend == "executorch")  # the one-program form's text model


def test_prefill_decode_and_generation_match_hf(text_setup, tiny_model, report):
    prompt, runtime, backend = text_setup
    theirs = hf_prefill(tiny_model, prompt).logits[torch.arange(2), prompt.last_index]
    rows = parity.logits_rows(runtime.prefill(prompt.input_ids, prompt.attention_mask), theirs, FP32)
    tokens = torch.randint(3, 400, (2, 12), generator=torch.Generator().manual_seed(3))  # across the window
    rows += parity.decode_rows(tiny_model, StaticRuntimePort.around(runtime, tiny_model.config), prompt, tokens, FP32)
    rows += parity.generation_rows(
        tiny_model, StaticRuntimePort.around(runtime, tiny_model.config), prompt, max_new_tokens=12
    )
    worst = merge([row for row in rows if "logits" in row.check], "executorch", "logits").value
    lowered = sum(len(stage.programs()) for stage in (*runtime.stages.layers, runtime.stages.lm_head))
    if backend == "executorch":  # the whole text model in one program: no stage was lowered
        assert lowered == 0 and set(runtime.program.methods()) == {"prefill", "decode"}
    report(f"ExecuTorch text ({backend}): {lowered} layer/head programs, logits vs HF {worst:.3g}, 24 greedy tokens")
    assert_rows_pass(rows)


@pytest.mark.parametrize("backend", BACKEND_PARAMS)
def test_generation_with_two_image_slots_matches_hf(tiny_model, edge_case, backend, report):
    prompt, max_seq = edge_case
    runtime = StaticGemma4Runtime(
        tiny_model, max_seq=max_seq, batch_size=2, backend=backend, image_slots=prompt.image_slots
    )
    theirs = hf_prefill(tiny_model, prompt).logits[torch.arange(2), prompt.last_index]
    args = (prompt.input_ids, prompt.attention_mask, prompt.pixel_values, prompt.image_position_ids)
    rows = parity.logits_rows(runtime.prefill(*args), theirs, FP32)
    rows += parity.generation_rows(
        tiny_model, StaticRuntimePort.around(runtime, tiny_model.config), prompt, max_new_tokens=6
    )
    programs = runtime.stages.vision.programs()
    assert len(programs) == 2 and all(len(fusion.programs()) == 1 for fusion in runtime.stages.fusions)
    report(
        f"ExecuTorch images ({backend}): vision programs at profiles 70 and 140, "
        f"{[p.delegated for p in programs]} XNNPACK subgraphs, portable {[len(p.portable) for p in programs]} ops; "
        f"logits vs HF {rows[0].value:.3g}"
    )
    assert_rows_pass(rows)


def test_a_shifted_mask_from_the_glue_fails_the_executorch_rows(text_setup, tiny_model, monkeypatch):
    """The programs really consume what the glue feeds them: a mask one position off breaks parity."""
    prompt, runtime, _ = text_setup
    original = LayerStack.cache_masks

    def shifted(self, positions, written, blocks=None, *, before=None):
        return {
            name: mask.roll(1, dims=-1)
            for name, mask in original(self, positions, written, blocks, before=before).items()
        }

    runtime.prefill(prompt.input_ids, prompt.attention_mask)
    monkeypatch.setattr(LayerStack, "cache_masks", shifted)
    tokens = torch.randint(3, 400, (2, 4), generator=torch.Generator().manual_seed(3))
    rows = parity.decode_rows(tiny_model, StaticRuntimePort.around(runtime, tiny_model.config), prompt, tokens, FP32)
    assert any(row.failed for row in rows)


@pytest.mark.nightly  # the traced twin is a program of its own: about 70 s of lowering with an empty cache
def test_every_layer_output_of_the_program_matches_hf(edge_runtimes, text_prompt_near_window, tiny_model, report):
    """Where a divergence starts stays visible in the one-program form: its traced twin (the same
    module, every layer's output returned) gives each layer's hidden states, compared with HF's. The
    program's own cache takes the prompt when the first decode step needs it: the steps match HF."""
    prompt, runtime = text_prompt_near_window, edge_runtimes["executorch"]
    ours = StaticRuntimePort.around(runtime, tiny_model.config).prefill(prompt, keep_intermediates=True)
    valid = prompt.attention_mask.bool()
    rows = parity.hidden_state_rows(ours.hidden_states, hf_prefill(tiny_model, prompt), valid, FP32)
    assert len(rows) == tiny_model.config.get_text_config().num_hidden_layers + 1
    tokens = torch.randint(3, 400, (2, 8), generator=torch.Generator().manual_seed(4))  # past the window
    steps = torch.stack([runtime.decode_one(tokens[:, step : step + 1]) for step in range(8)], dim=1)
    rows.append(
        parity.stage_row(
            "decode steps",
            "8 steps after the traced prefill",
            steps,
            hf_decode_logits(tiny_model, prompt, tokens),
            FP32,
        )
    )
    report(
        f"ExecuTorch one program, traced: {len(rows) - 1} hidden states vs HF, worst {max(r.value for r in rows):.3g}"
    )
    assert_rows_pass(rows)


@pytest.mark.nightly  # a program lowered per fault: about 3.5 minutes
def test_the_fault_self_test_reaches_inside_the_program(tiny_model, report):
    """The fault self-test on the one-program form: a porting bug in the decoder layer's code
    (``layer-scalar-missing``) is lowered into a fresh program (none lowered before is reused) and
    the layer rows, read from the program's traced twin, catch it (nothing decodes: only the traced
    twin is lowered)."""
    fault = faults_named(["layer-scalar-missing"])[0]
    result = run_fault(fault, tiny_model, VerifyOptions(groups=("layers",), backend="executorch"))
    report(f"self-test on ExecuTorch (one program): {format_result(result)}")
    assert result.caught and result.failed[0].stage == "decoder layers"


@pytest.mark.nightly  # the stage programs' (BACKEND_PARAMS)
def test_operator_report(edge_runtimes, text_prompt_near_window):
    """Each stage program says what XNNPACK took and what fell back to the portable kernels: with the
    lowering decompositions (``npu.delegable``) a decoder layer is one XNNPACK subgraph, RMSNorm,
    RoPE and attention included; only the cache placement stays on portable kernels."""
    prompt, runtime = text_prompt_near_window, edge_runtimes["executorch-stages"]
    runtime.prefill(prompt.input_ids, prompt.attention_mask)  # lowers what an earlier test did not
    programs = [program for stage in runtime.stages.layers for program in stage.programs()]
    assert programs and all(program.delegated >= 1 for program in programs)
    fallbacks = {op for program in programs for op in program.portable}
    placement = {"aten::scatter.src", "aten::expand_copy", "aten::unsqueeze_copy", "aten::view_copy"}  # slot index
    assert fallbacks <= placement, fallbacks - placement


def test_an_empty_argument_is_made_inside_the_program():
    """A model without per-layer embeddings hands every layer an empty ``(B, S, 0)`` per-layer input;
    ExecuTorch's runtime aborts on an empty input whose leading dim is above 1, so the program makes
    it itself and takes only the other tensors."""

    class Layer(torch.nn.Module):
        def forward(self, hidden: torch.Tensor, per_layer_input: torch.Tensor) -> torch.Tensor:
            return hidden * 2 + per_layer_input.sum(-1, keepdim=True)

    hidden, empty = torch.randn(2, 4, 8), torch.zeros(2, 4, 0)
    stage = EdgeStage("layer", Layer())
    assert torch.equal(stage(hidden, empty), hidden * 2)
    assert len(stage.programs()) == 1


def test_a_stage_keeps_its_program_when_the_cache_lets_go():
    """A loaded stage program holds its ``.pte`` bytes itself: after the program cache forgets them
    (as the fault self-test's fresh programs do) the stage still runs, and right (before, a stage
    loaded earlier ran from freed memory and crashed the process), and still reports it (the operator
    report read the cache's list, empty after the fault self-test had run in the same worker)."""

    class Double(torch.nn.Module):
        def forward(self, hidden: torch.Tensor) -> torch.Tensor:
            return hidden * 2 + 1

    hidden = torch.randn(2, 4, 8)
    stage = EdgeStage("layer", Double())
    assert torch.equal(stage(hidden), hidden * 2 + 1)
    size = len(stage.programs()[0].buffer)
    forget_programs()
    gc.collect()
    churn = [bytes([index]) * size for index in range(64)]  # new objects where the freed bytes were
    assert len(churn) == 64 and torch.equal(stage(hidden), hidden * 2 + 1)
    assert [len(program.buffer) for program in stage.programs()] == [size]  # what it reports is its own
