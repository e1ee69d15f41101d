"""Stage programs (the ``executorch-stages`` backend): every NPU stage lowered to an ExecuTorch
program and run by ExecuTorch's runtime, behind the same call signature as the PyTorch module it
replaces.

A stage is lowered the first time it is called with a given static signature (the shapes and
dtypes of its tensor arguments, ``None`` where an argument is absent): ``torch.export`` of a
wrapper that takes the flat list of tensors (an ExecuTorch program's inputs are a fixed list of
tensors), lowered by :mod:`.lowering`. Programs are cached per (weights, signature)
(:mod:`.program_cache`), so two runtimes of one model at the same shapes share them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils import _pytree as pytree

from ..npu.flat_call import CompiledStage, FlatInputs, call_signature, flat_tensors, output_structure
from ..npu.stages import compiled_stages
from .lowering import export_for_lowering, lower
from .program_cache import Lowered


@dataclass(frozen=True)
class LoadedMethod:
    """A stage program's loaded ``forward`` method, its output structure, the loaded program (held: it
    holds the ``.pte`` bytes the method runs from, which the program cache may let go) and what the
    lowering reported of it."""

    method: Any
    out_spec: Any
    program: Any
    lowered: Lowered


def stage_weights(module: nn.Module) -> tuple:
    """What identifies a stage: its class and its weight tensors (stages built twice from one model
    share them), or the module itself when it holds none."""
    parameters = tuple(id(parameter) for parameter in module.parameters())
    return (type(module).__qualname__, parameters) if parameters else ("module", id(module))


def stage_program(module: nn.Module, args: tuple, quantization: Any = None) -> Lowered:
    """``module`` at the static signature of ``args`` as an ExecuTorch program (through the cache);
    with a ``quantization`` (:class:`~gemma4_static.executorch.xnnpack_quant.XnnpackQuantization`),
    the exported graph quantized first (PT2E)."""
    weights, signature = stage_weights(module), call_signature(args)
    # runtimes that adopted one calibration share its observer states, and so its programs
    key = (weights, signature, None if quantization is None else id(quantization.observers))

    def exported() -> dict[str, torch.export.ExportedProgram]:
        tensors, spec, fixed = flat_tensors(args)
        example = tuple(tensor.contiguous() for tensor in tensors)  # programs take dense inputs
        program = export_for_lowering(FlatInputs(module, spec, fixed), example)
        if quantization is not None:
            program = export_for_lowering(quantization.quantized(program.module(), weights, signature), example)
        return {"forward": program}

    return lower(key, module, exported, label=weights[0], quantized=quantization is not None)


class EdgeStage(CompiledStage):
    """Calls ``module``'s ExecuTorch program for the signature it is called with (lowered on first
    use). With a ``quantization`` the program is quantized; while that calibrates, the stage runs
    ``module`` in float and records its inputs."""

    def __init__(self, name: str, module: nn.Module, quantization: Any = None) -> None:
        super().__init__(name, module)
        self.quantization = quantization
        self._loaded: dict[tuple, LoadedMethod] = {}

    @property
    def weights(self) -> tuple:
        return stage_weights(self.module)

    def program(self, args: tuple) -> LoadedMethod:
        """The loaded program for the signature of ``args`` (lowered, or read from the cache, on first use)."""
        quantization = self.quantization
        key = (call_signature(args), None if quantization is None else id(quantization.observers))
        if key not in self._loaded:
            from executorch.runtime import Runtime

            lowered = stage_program(self.module, args, quantization)
            program = Runtime.get().load_program(lowered.buffer)
            method, out_spec = program.load_method("forward"), output_structure(self.module, args)
            self._loaded[key] = LoadedMethod(method, out_spec, program, lowered)
        return self._loaded[key]

    def __call__(self, *args: Any) -> Any:
        if self.quantization is not None and self.quantization.recording:
            inputs = [tensor.contiguous() for tensor in flat_tensors(args)[0]]
            self.quantization.record(self.weights, call_signature(args), inputs)
            return self.module(*args)
        program = self.program(args)
        outputs = program.method.execute([tensor.contiguous() for tensor in flat_tensors(args)[0]])
        # the method's output buffers are reused by its next call: keep copies
        return pytree.tree_unflatten([output.clone() for output in outputs], program.out_spec)

    def programs(self) -> list[Lowered]:
        """Every program this stage has loaded so far, one per signature it was called with (its own
        list: the program cache may have forgotten them since)."""
        return [loaded.lowered for loaded in self._loaded.values()]


def stage_programs(stages: Any, quantization: Any = None) -> Any:
    """A copy of ``stages`` (the PyTorch :class:`~gemma4_static.npu.stages.Stages`) whose every deployed
    stage runs through ExecuTorch (the stages ``quantization`` quantizes as quantized programs)."""

    def edge_stage(name: str, stage: nn.Module) -> EdgeStage:
        quantized = quantization is not None and quantization.quantizes(stage)
        return EdgeStage(name, stage, quantization if quantized else None)

    return compiled_stages(stages, edge_stage)
