"""Export of the NPU-side stages with ``torch.export`` at their static shapes.

:func:`stage_cases` lists each stage with the example inputs it declares at the runtime's static
shapes (seeded random values; integer inputs in range); :func:`export_stages` writes one ``.pt2`` per case and a
``manifest.json`` of input and output shapes and dtypes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn
from torch.fx import config as fx_config

from .cpu.vision import build_vision_inputs, fit_patches
from .npu.decoder import MODES
from .npu.stages import runs_on_npu
from .runtime import StaticGemma4Runtime


@dataclass(frozen=True)
class StageCase:
    """One exportable stage: a module and example inputs at its static shapes (positional ``args``
    and keyword ``kwargs``)."""

    name: str
    module: nn.Module
    args: tuple
    kwargs: dict = field(default_factory=dict)


def _layer_cases(runtime: StaticGemma4Runtime, generator: torch.Generator, *, representative: bool) -> list[StageCase]:
    """Decoder layers in prefill, chunk and decode mode, at the cache layout's sizes (a sliding ring
    holds ``sliding_window`` slots); ``representative``: only the first layer of each (layer type,
    produces/reuses K/V) combination."""
    batch, max_seq = runtime.layout.batch_size, runtime.layout.max_seq
    lengths = {"prefill": max_seq, "chunk": runtime.layout.prefill_chunk or min(16, max_seq), "decode": 1}
    seen, cases = set(), []
    for index, (layer, layer_type) in enumerate(
        zip(runtime.modules.layers, runtime.spec.text.layer_types, strict=True)
    ):
        if representative and (layer_type, layer.reuses_kv) in seen:
            continue
        seen.add((layer_type, layer.reuses_kv))
        kind = "reuse" if layer.reuses_kv else "produce"
        capacity, ring = runtime.cache.capacity[layer_type], runtime.cache.is_ring(layer_type)
        for mode in MODES:
            slots = (
                capacity + lengths[mode] if mode == "chunk" and ring else capacity
            )  # a ring makes room for the chunk
            args = layer.example_inputs(batch, lengths[mode], generator, cache_slots=slots, mode=mode)
            cases.append(StageCase(f"layer{index:02d}_{layer_type}_{kind}_{mode}", layer, args))
    return cases


def stage_cases(
    runtime: StaticGemma4Runtime,
    *,
    pixel_values: torch.Tensor | None = None,
    image_position_ids: torch.Tensor | None = None,
    representative: bool = False,
    seed: int = 0,
) -> list[StageCase]:
    """Every NPU-side stage of ``runtime`` with the example inputs it declares: the vision stage once
    per vision profile of the layout (``vision_prefill_<profile>``; it needs example
    ``pixel_values``/``image_position_ids`` at any patch count), one fusion per image slot."""
    generator = torch.Generator().manual_seed(seed)
    stages, batch, max_seq = runtime.modules, runtime.layout.batch_size, runtime.layout.max_seq
    cases = [StageCase("token_embedding", stages.embedding, stages.embedding.example_inputs(batch, max_seq, generator))]
    if runs_on_npu(stages.per_layer_inputs):
        ple = stages.per_layer_inputs
        cases.append(StageCase("per_layer_inputs", ple, ple.example_inputs(batch, max_seq, generator)))
    if stages.fusions and pixel_values is not None:
        for profile in sorted(set(runtime.layout.vision_profiles)):
            args = _vision_args(runtime, pixel_values, image_position_ids, profile)
            cases.append(StageCase(f"vision_prefill_{profile}", stages.vision, args))
        for index, fusion in enumerate(stages.fusions):
            cases.append(StageCase(f"fusion{index}", fusion, fusion.example_inputs(batch, max_seq, generator)))
    cases += _layer_cases(runtime, generator, representative=representative)
    cases.append(StageCase("lm_head", stages.lm_head, stages.lm_head.example_inputs(batch, 1, generator)))
    return cases


def _vision_args(
    runtime: StaticGemma4Runtime, pixel_values: torch.Tensor, image_position_ids: torch.Tensor, profile: int
) -> tuple[torch.Tensor, ...]:
    """The vision stage's inputs at ``profile`` for ``batch_size`` of the example images that fit it."""
    spec, budget = runtime.spec.vision, profile * runtime.spec.vision.pooling_kernel_size**2
    fitting = ((image_position_ids != -1).any(dim=-1).sum(dim=-1) <= budget).nonzero().flatten()
    if not len(fitting):
        raise ValueError(f"no example image fits the vision profile of {profile} soft tokens ({budget} patches)")
    chosen = fitting[torch.arange(runtime.layout.batch_size) % len(fitting)]
    pixels, positions = fit_patches(pixel_values[chosen], image_position_ids[chosen], spec, profile=profile)
    inputs = build_vision_inputs(spec, positions, profile=profile, dtype=runtime.spec.dtype)
    return (pixels, *inputs.stage_args())


def export_case(case: StageCase, *, stack_traces: bool = True) -> torch.export.ExportedProgram:
    """``torch.export`` (non-strict) of one stage at its example shapes. ``stack_traces``: each node
    keeps the source lines that made it (what a reader follows from a graph back to the code); a
    round trip that only replays the graph leaves them out, a fifth of the export's time."""
    emitting = fx_config.do_not_emit_stack_traces
    fx_config.do_not_emit_stack_traces = not stack_traces
    try:
        return torch.export.export(case.module, case.args, case.kwargs or None, strict=False)
    finally:
        fx_config.do_not_emit_stack_traces = emitting


def _describe(value) -> list[dict] | dict | None:
    if value is None:
        return None
    if isinstance(value, tuple | list):
        return [_describe(item) for item in value]
    return {"shape": list(value.shape), "dtype": str(value.dtype).removeprefix("torch.")}


FORMATS = ("pt2", "pte")


def export_stages(runtime: StaticGemma4Runtime, folder: str | Path, *, format: str = "pt2", **case_options) -> Path:
    """Export every stage to ``folder/<stage>.<format>`` and write ``folder/manifest.json``; returns
    the manifest path. ``pt2``: ``torch.export`` programs; ``pte``: ExecuTorch programs lowered with
    XNNPACK (needs the executorch extra), whose manifest entries also list the delegated subgraphs
    and the operators left to the portable kernels, and whose inputs are the flat tensor list."""
    if format not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {format!r}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    layout = runtime.layout
    manifest = {
        "layout": "stage-per-program",
        "max_seq": layout.max_seq,
        "batch_size": layout.batch_size,
        "image_slots": [list(slot) for slot in layout.image_slots],
        "vision_profiles": list(layout.vision_profiles),
        "stages": [],
    }
    for case in stage_cases(runtime, **case_options):
        entry = {"name": case.name, "file": f"{case.name}.{format}", "inputs": _describe(case.args)}
        if format == "pt2":
            program = export_case(case)
            torch.export.save(program, folder / entry["file"])
            entry["outputs"] = _describe(program.module()(*case.args))
        else:
            from .executorch.stage_programs import stage_program

            lowered = stage_program(case.module, case.args)
            (folder / entry["file"]).write_bytes(lowered.buffer)
            entry.update(delegated_subgraphs=lowered.delegated, portable_operators=list(lowered.portable))
            entry["outputs"] = _describe(case.module(*case.args))
        manifest["stages"].append(entry)
    path = folder / "manifest.json"
    path.write_text(json.dumps(manifest, indent=2) + "\n")
    return path
