"""Every NPU-side stage exports with torch.export at its static shapes and computes what it computes eagerly."""

from __future__ import annotations

import json

import pytest
import torch
from torch.fx import config as fx_config

from gemma4_static.export import export_case, export_stages, stage_cases
from gemma4_static.oracle.checks import parity
from gemma4_static.oracle.results.report import assert_rows_pass, merge
from gemma4_static.runtime import StaticGemma4Runtime

MAX_SEQ = 208


def _assert_every_layer_kind_in_every_mode(cases, window: int, max_seq: int) -> None:
    """One representative layer per (type, produce/reuse), each in prefill, chunk and decode mode;
    decode with the ring layout: a sliding layer's cache input holds the window, a full layer's
    ``max_seq``."""
    names = {case.name for case in cases}
    for kind in [f"{layer}_attention_{role}" for layer in ("sliding", "full") for role in ("produce", "reuse")]:
        modes = {mode for mode in ("prefill", "chunk", "decode") if any(f"{kind}_{mode}" in n for n in names)}
        assert modes == {"prefill", "chunk", "decode"}, kind
    decode_slots = {
        "sliding" if "sliding_attention" in case.name else "full": case.args[5][0].shape[2]
        for case in cases
        if case.name.endswith("produce_decode")
    }
    assert decode_slots == {"sliding": window, "full": max_seq}


# tolerances.EXPORT_RELATIVE: the exported graph replays the same aten ops on the same inputs; fp32
# results agree to within reassociation noise of its decompositions (observed: 0); a changed shape
# or dtype is a failure of its own


def test_exported_stages_equal_eager(e2b_model, report):
    runtime = StaticGemma4Runtime(e2b_model, max_seq=640, prefill_chunk=128)
    cases = stage_cases(runtime, representative=True)
    _assert_every_layer_kind_in_every_mode(cases, e2b_model.config.get_text_config().sliding_window, 640)
    rows = parity.export_rows(cases)
    worst = merge(rows, "export round-trip", "all").value
    report(f"export round-trip ({len(cases)} stages): max |exported - eager| {worst:.3g}")
    assert_rows_pass(rows)


def test_the_round_trip_leaves_out_the_stack_traces_that_an_exported_file_keeps(tiny_model, monkeypatch):
    """``verify``'s round trip exports without the nodes' source stack traces (only replayed: a fifth
    of the export's time saved); a stage exported for a file keeps them; torch's setting is as it was
    after either, and after an export that raised."""
    (case,) = [case for case in stage_cases(StaticGemma4Runtime(tiny_model, max_seq=8)) if case.name == "lm_head"]
    emitting, original = fx_config.do_not_emit_stack_traces, torch.export.export
    traced: dict[bool, torch.export.ExportedProgram] = {}

    def kept(*args, **kwargs):
        traced[fx_config.do_not_emit_stack_traces] = program = original(*args, **kwargs)
        return program

    monkeypatch.setattr(torch.export, "export", kept)
    rows = parity.export_rows([case])
    assert [(row.stage, row.check) for row in rows] == [("export round-trip", "lm_head output 0")]
    assert_rows_pass(rows)
    export_case(case)
    assert set(traced) == {True, False} and fx_config.do_not_emit_stack_traces == emitting
    calls = {
        without: [node for node in program.graph.nodes if node.op == "call_function"]
        for without, program in traced.items()
    }
    assert calls[True] and not any(node.meta.get("stack_trace") for node in calls[True])
    assert calls[False] and all(node.meta.get("stack_trace") for node in calls[False])

    def raises(*args, **kwargs):
        raise RuntimeError("export failed")

    monkeypatch.setattr(torch.export, "export", raises)
    with pytest.raises(RuntimeError, match="export failed"):
        export_case(case, stack_traces=False)
    assert fx_config.do_not_emit_stack_traces == emitting


@pytest.mark.executorch  # every stage exported to files, ~5 s: the lane of exported programs
def test_export_stages_writes_programs_and_manifest(export_setup, tiny_model, tmp_path):
    """Every stage of the multimodal model (the vision stage at each slot's profile, one fusion per
    slot) saved and listed in the manifest with the layout's image slots; a saved program loads
    and replays eager. (Each stage's in-memory round-trip on this model is a row of ``verify``,
    run end to end in tests/unit/commands/test_verify_command.py.)"""
    runtime, images = export_setup
    manifest = json.loads(export_stages(runtime, tmp_path, representative=True, **images).read_text())
    assert manifest["max_seq"] == MAX_SEQ and manifest["batch_size"] == 1
    assert manifest["image_slots"] == [[3, 64], [71, 121]] and manifest["vision_profiles"] == [70, 140]
    names = [stage["name"] for stage in manifest["stages"]]
    vision_and_fusion = ["vision_prefill_70", "vision_prefill_140", "fusion0", "fusion1"]
    assert names[:6] == ["token_embedding", "per_layer_inputs", *vision_and_fusion]
    vision = {stage["name"]: stage["inputs"][0]["shape"] for stage in manifest["stages"][2:4]}
    assert vision == {"vision_prefill_70": [1, 280, 48], "vision_prefill_140": [1, 560, 48]}
    assert names[-1] == "lm_head"
    embedding = manifest["stages"][0]
    assert embedding["inputs"] == [{"shape": [1, MAX_SEQ], "dtype": "int64"}]
    assert embedding["outputs"] == {"shape": [1, MAX_SEQ, 64], "dtype": "float32"}
    for stage in manifest["stages"]:
        assert (tmp_path / stage["file"]).is_file()
    cases = stage_cases(runtime, representative=True, **images)
    assert [case.name for case in cases] == names
    _assert_every_layer_kind_in_every_mode(cases, tiny_model.config.get_text_config().sliding_window, MAX_SEQ)
    (lm_head,) = [case for case in cases if case.name == "lm_head"]
    assert_rows_pass(parity.replay_rows(lm_head, torch.export.load(tmp_path / "lm_head.pt2")))


# ops whose output shape or control flow depends on tensor values: none may appear in a static stage
DATA_DEPENDENT_OPS = ("nonzero", "masked_select", "_local_scalar_dense", "unique", "one_hot", "item", "max", "argmax")


def test_exported_vision_stage_is_static(export_setup, report):
    """The vision stage exports at the profile's patch budget, equals eager, and its graph has no
    data-dependent operator and no unbacked size (HF's pooler takes a max over the positions and
    builds a one-hot from it; ours gets a static pooling matrix from the CPU side)."""
    runtime, images = export_setup
    (case,) = [case for case in stage_cases(runtime, **images) if case.name == "vision_prefill_70"]
    program = export_case(case)
    assert not program.range_constraints, program.range_constraints
    targets = {str(node.target) for node in program.graph.nodes if node.op == "call_function"}
    offending = {target for target in targets if any(f"aten.{op}." in target for op in DATA_DEPENDENT_OPS)}
    assert offending == set(), offending
    rows = parity.replay_rows(case, program)  # the program above, not a second export
    report(f"vision stage export: {len(targets)} distinct ops, max |exported - eager| {rows[0].value:.3g}")
    assert_rows_pass(rows)
