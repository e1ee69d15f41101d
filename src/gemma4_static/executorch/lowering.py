"""The one way this project makes an ExecuTorch program: ``torch.export`` (non-strict) with the
decompositions that keep operators delegable (:mod:`.decompositions`), ``to_edge_transform_and_lower``
with the XNNPACK partitioner (what XNNPACK does not take runs on ExecuTorch's portable operators),
then ExecuTorch's emitter; every result goes through the one cache of lowered programs
(:mod:`.program_cache`). ``executorch`` is imported only here, when something is lowered."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable
from typing import Any

import torch
from torch import nn

from .decompositions import LOWERING_DECOMPOSITIONS
from .program_cache import Lowered, cached_lowering

DELEGATE_CALL = "executorch_call_delegate"
log = logging.getLogger(__name__)


def export_for_lowering(module: nn.Module, args: tuple) -> torch.export.ExportedProgram:
    """``torch.export`` (non-strict) of ``module`` at ``args`` with the delegable decompositions: what
    the lowering takes, for a stage program, the one-program form and the bundle alike."""
    with torch.no_grad():
        exported = torch.export.export(module, args, strict=False)
    return exported.run_decompositions(LOWERING_DECOMPOSITIONS)


def lower(
    identity: Hashable,
    owner: Any,
    export: Callable[[], dict[str, torch.export.ExportedProgram]],
    *,
    mutable_buffers: tuple[str, ...] = (),
    label: str = "program",
    quantized: bool = False,
) -> Lowered:
    """The program of the methods ``export()`` returns (name -> exported program), lowered with
    XNNPACK, through the cache: ``identity`` names it within this process (``owner``, e.g. the module,
    is held so the ids in it stay unique), its content across processes. ``mutable_buffers``: buffers
    the methods share and mutate (the KV cache of the one-program form), which start at zeros."""

    def build(methods: dict[str, torch.export.ExportedProgram]) -> Lowered:
        log.info("lowering %s (%s) with XNNPACK", label, ", ".join(methods))
        started = time.perf_counter()
        lowered = _to_executorch(methods, mutable_buffers)
        log.info("lowered %s in %.1f s", label, time.perf_counter() - started)
        return lowered

    options = {"mutable_buffers": mutable_buffers}
    return cached_lowering(identity, owner, export, build, options, label=label, quantized=quantized)


def _op_name(target: Any) -> str:
    return target.name() if hasattr(target, "name") else str(target)


def _to_executorch(methods: dict[str, torch.export.ExportedProgram], mutable_buffers: tuple[str, ...]) -> Lowered:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower
    from executorch.exir.passes import MemoryPlanningPass
    from executorch.exir.passes.init_mutable_pass import InitializedMutableBufferPass

    edge = to_edge_transform_and_lower(methods, partitioner=[XnnpackPartitioner()])
    targets = [
        _op_name(node.target)
        for name in methods
        for node in edge.exported_program(name).graph.nodes
        if node.op == "call_function"
    ]
    delegated = sum(DELEGATE_CALL in target for target in targets)
    portable = tuple(sorted({t for t in targets if DELEGATE_CALL not in t and "getitem" not in t}))
    config = None
    if mutable_buffers:
        config = ExecutorchBackendConfig(
            passes=[InitializedMutableBufferPass(list(mutable_buffers))],
            memory_planning_pass=MemoryPlanningPass(alloc_graph_input=False, share_mutable_buffers=True),
            emit_mutable_buffer_names=True,
            run_reinplace_pass=True,
        )
    return Lowered(edge.to_executorch(config).buffer, delegated, portable)
