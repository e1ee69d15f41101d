"""Every NPU-side stage exports with torch.export at its static shapes and computes what it computes eagerly."""

from __future__ import annotations

import json

import pytest
import torch

from gemma4_static.export import export_case, export_stages, stage_cases
from gemma4_static.oracle.checks import parity
from gemma4_static.oracle.checks.report import assert_rows_pass, merge
from gemma4_static.oracle.references.samples import image_prompt
from gemma4_static.runtime import StaticGemma4Runtime


@pytest.fixture(scope="module")
def tiny_setup(tiny_model):
    prompt = image_prompt(tiny_model.config, text_after=[3])
    runtime = StaticGemma4Runtime(
        tiny_model,
        max_seq=192,
        **prompt.image_slot,
        prefill_chunk=96,
    )
    return runtime, {"pixel_values": prompt.pixel_values, "image_position_ids": prompt.image_position_ids}


def _cases(request, model_name):
    if model_name == "tiny":
        runtime, images = request.getfixturevalue("tiny_setup")
        return stage_cases(runtime, representative=True, **images)
    runtime = StaticGemma4Runtime(request.getfixturevalue("e2b_model"), max_seq=640, prefill_chunk=128)
    return stage_cases(runtime, representative=True)


def _window(request, model_name: str) -> int:
    model = request.getfixturevalue("tiny_model" if model_name == "tiny" else "e2b_model")
    return model.config.get_text_config().sliding_window


@pytest.mark.parametrize("model_name", ["tiny", "e2b-geometry"])
def test_exported_stages_equal_eager(request, model_name, report):
    cases = _cases(request, model_name)
    names = {case.name for case in cases}
    # one representative layer per (type, produce/reuse), each in prefill, chunk and decode mode
    for kind in (
        "sliding_attention_produce",
        "sliding_attention_reuse",
        "full_attention_produce",
        "full_attention_reuse",
    ):
        assert {mode for mode in ("prefill", "chunk", "decode") if any(f"{kind}_{mode}" in n for n in names)} == {
            "prefill",
            "chunk",
            "decode",
        }, kind
    # decode with the ring layout: a sliding layer's cache input holds the window, a full layer's max_seq
    decode_slots = {
        "sliding" if "sliding_attention" in case.name else "full": case.args[5][0].shape[2]
        for case in cases
        if case.name.endswith("produce_decode")
    }
    assert decode_slots == {"sliding": _window(request, model_name), "full": 192 if model_name == "tiny" else 640}
    # tolerances.EXPORT_RELATIVE: the exported graph replays the same aten ops on the same inputs;
    # fp32 results agree to within reassociation noise of its decompositions (observed: 0); a
    # changed shape or dtype is a failure of its own
    rows = parity.export_rows(cases)
    worst = merge(rows, "export round-trip", "all").value
    report(f"export round-trip ({len(cases)} stages): max |exported - eager| {worst:.3g}")
    assert_rows_pass(rows)


def test_export_stages_writes_programs_and_manifest(tiny_setup, tmp_path):
    runtime, images = tiny_setup
    manifest_path = export_stages(runtime, tmp_path, representative=True, **images)
    manifest = json.loads(manifest_path.read_text())
    assert manifest["max_seq"] == 192 and manifest["batch_size"] == 1
    names = [stage["name"] for stage in manifest["stages"]]
    assert names[:4] == ["token_embedding", "per_layer_inputs", "vision_prefill", "fusion"]
    assert names[-1] == "lm_head"
    embedding = manifest["stages"][0]
    assert embedding["inputs"] == [{"shape": [1, 192], "dtype": "int64"}]
    assert embedding["outputs"] == {"shape": [1, 192, 64], "dtype": "float32"}
    for stage in manifest["stages"]:
        assert (tmp_path / stage["file"]).is_file()
    loaded = torch.export.load(tmp_path / "lm_head.pt2")
    hidden = torch.randn(1, 1, 64)
    # exact: the saved and reloaded program replays the same fp32 ops on the same input
    torch.testing.assert_close(loaded.module()(hidden), runtime.modules.lm_head(hidden), rtol=0, atol=0)


# ops whose output shape or control flow depends on tensor values: none may appear in a static stage
DATA_DEPENDENT_OPS = ("nonzero", "masked_select", "_local_scalar_dense", "unique", "one_hot", "item", "max", "argmax")


def test_exported_vision_stage_is_static(tiny_setup, report):
    """The vision stage exports at the profile's patch budget, equals eager, and its graph has no
    data-dependent operator and no unbacked size (HF's pooler takes a max over the positions and
    builds a one-hot from it; ours gets a static pooling matrix from the CPU side)."""
    runtime, images = tiny_setup
    (case,) = [case for case in stage_cases(runtime, **images) if case.name == "vision_prefill"]
    program = export_case(case)
    assert not program.range_constraints, program.range_constraints
    targets = {str(node.target) for node in program.graph.nodes if node.op == "call_function"}
    offending = {target for target in targets if any(f"aten.{op}." in target for op in DATA_DEPENDENT_OPS)}
    assert offending == set(), offending
    rows = parity.export_rows([case])
    report(f"vision stage export: {len(targets)} distinct ops, max |exported - eager| {rows[0].value:.3g}")
    assert_rows_pass(rows)
