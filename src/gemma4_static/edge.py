"""The ExecuTorch backend: every NPU stage lowered to an ExecuTorch program and run by ExecuTorch's
runtime, behind the same call signature as the PyTorch module it replaces.

A stage is lowered the first time it is called with a given static signature (the shapes and
dtypes of its tensor arguments, ``None`` where an argument is absent): ``torch.export`` of a
wrapper that takes the flat list of tensors (an ExecuTorch program's inputs are a fixed list of
tensors), then ``to_edge_transform_and_lower`` with the XNNPACK partitioner; what XNNPACK does not
take runs on ExecuTorch's portable operators. Programs are cached per (weights, signature), so two
runtimes of one model at the same shapes share them. ``executorch`` is the optional extra
``gemma4-static[executorch]``, imported only when a stage is lowered.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils import _pytree as pytree

from .npu.delegable import LOWERING_DECOMPOSITIONS

BACKENDS = ("torch", "executorch", "executorch-stages")

DELEGATE_CALL = "executorch_call_delegate"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoweredProgram:
    """One stage at one signature: the ``.pte`` bytes, the loaded method, the output structure and
    which operators XNNPACK took (``delegated`` subgraphs) and which fell back to portable kernels."""

    buffer: bytes
    method: Any
    out_spec: Any
    delegated: int
    portable: tuple[str, ...]


def _fixed(leaf: Any) -> tuple | None:
    """How a program rebuilds an argument it does not take as an input: ``None`` stays ``None``, an
    empty tensor (a model's missing per-layer inputs, ``(B, S, 0)``) is made inside the program
    (ExecuTorch's runtime aborts on an empty input whose leading dim is above 1); ``None`` for a
    tensor the program takes."""
    if leaf is None:
        return ("none",)
    if isinstance(leaf, torch.Tensor) and leaf.numel() == 0:
        return ("empty", tuple(leaf.shape), leaf.dtype)
    return None


def _tensors(args: tuple) -> tuple[list[torch.Tensor], Any, tuple[tuple | None, ...]]:
    """The tensors a program takes among ``args`` (nested tuples flattened), the structure, and how
    each leaf it does not take is rebuilt (:func:`_fixed`)."""
    leaves, spec = pytree.tree_flatten(args)
    fixed = tuple(_fixed(leaf) for leaf in leaves)
    return [leaf for leaf, rebuilt in zip(leaves, fixed, strict=True) if rebuilt is None], spec, fixed


class _FlatInputs(nn.Module):
    """``module`` called with its arguments rebuilt from a flat list of tensors."""

    def __init__(self, module: nn.Module, spec: Any, fixed: tuple[tuple | None, ...]) -> None:
        super().__init__()
        self.module, self.spec, self.fixed = module, spec, fixed

    def forward(self, *tensors: torch.Tensor) -> Any:
        given = iter(tensors)
        leaves = [
            next(given)
            if rebuilt is None
            else None
            if rebuilt[0] == "none"
            else torch.zeros(rebuilt[1], dtype=rebuilt[2])
            for rebuilt in self.fixed
        ]
        return self.module(*pytree.tree_unflatten(leaves, self.spec))


def _signature(args: tuple) -> tuple:
    tensors, spec, fixed = _tensors(args)
    return str(spec), fixed, tuple((tuple(t.shape), t.dtype) for t in tensors)


def _op_name(target: Any) -> str:
    return target.name() if hasattr(target, "name") else str(target)


def export_for_lowering(module: nn.Module, args: tuple) -> torch.export.ExportedProgram:
    """``torch.export`` (non-strict) of ``module`` at ``args`` with the decompositions that keep its
    operators delegable (:mod:`~gemma4_static.npu.delegable`): what ExecuTorch's lowering takes, for
    a stage program and for the bundle's methods alike."""
    with torch.no_grad():
        exported = torch.export.export(module, args, strict=False)
    return exported.run_decompositions(LOWERING_DECOMPOSITIONS)


def lower(
    module: nn.Module, args: tuple, quantize: Callable[[torch.fx.GraphModule], torch.fx.GraphModule] | None = None
) -> LoweredProgram:
    """``module`` at the static signature of ``args``, lowered to an ExecuTorch program and loaded;
    ``quantize`` turns the exported graph (taking the flat tensors) into a quantized one first (PT2E:
    :mod:`~gemma4_static.quant.xnnpack`)."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from executorch.runtime import Runtime

    tensors, spec, fixed = _tensors(args)
    log.info("lowering %s %s with XNNPACK", type(module).__name__, [tuple(tensor.shape) for tensor in tensors])
    started = time.perf_counter()
    example = tuple(tensor.contiguous() for tensor in tensors)  # programs take dense inputs
    exported = export_for_lowering(_FlatInputs(module, spec, fixed), example)
    if quantize is not None:
        exported = export_for_lowering(quantize(exported.module()), example)
    edge = to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()])
    targets = [_op_name(node.target) for node in edge.exported_program().graph.nodes if node.op == "call_function"]
    delegated = sum(DELEGATE_CALL in target for target in targets)
    portable = tuple(sorted({t for t in targets if DELEGATE_CALL not in t and "getitem" not in t}))
    buffer = edge.to_executorch().buffer
    method = Runtime.get().load_program(buffer).load_method("forward")
    log.info("lowered %s in %.1f s", type(module).__name__, time.perf_counter() - started)
    return LoweredProgram(buffer, method, exported.call_spec.out_spec, delegated, portable)


# (weights, signature) -> (the module, its program); holding the module keeps its parameters alive,
# so their ids in the key can never be reused by another model's tensors
_PROGRAMS: dict[tuple, tuple[nn.Module, LoweredProgram]] = {}


def lowered_programs() -> list[tuple[str, bool, LoweredProgram]]:
    """Every stage program lowered so far: its stage's class, whether it is quantized, the program."""
    return [(weights[0], quantized is not None, program) for (weights, _, quantized), (_, program) in _PROGRAMS.items()]


def forget_programs() -> None:
    """Drop every lowered stage program (the next call lowers afresh)."""
    _PROGRAMS.clear()


class EdgeStage:
    """Calls ``module``'s ExecuTorch program for the signature it is called with (lowered on first
    use). With a ``quantization`` (:class:`~gemma4_static.quant.xnnpack.XnnpackQuantization`) the
    program is quantized; while that calibrates, the stage runs ``module`` in float and records its inputs."""

    def __init__(self, name: str, module: nn.Module, quantization: Any = None) -> None:
        self.name, self.module, self.quantization = name, module, quantization

    def __getattr__(self, attribute: str) -> Any:  # the stage's own attributes (e.g. ``reuses_kv``)
        if attribute == "module":  # not set yet (e.g. while copying): no recursion
            raise AttributeError(attribute)
        return getattr(self.module, attribute)

    @property
    def weights(self) -> tuple:
        """What identifies the stage: its class and its weight tensors (stages built twice from one
        model share them), or the module itself when it holds none."""
        parameters = tuple(id(parameter) for parameter in self.module.parameters())
        return (type(self.module).__qualname__, parameters) if parameters else ("module", id(self.module))

    def program(self, args: tuple) -> LoweredProgram:
        signature, quantization = _signature(args), self.quantization
        # runtimes that adopted one calibration share its observer states, and so its programs
        key = (self.weights, signature, None if quantization is None else id(quantization.observers))
        if key not in _PROGRAMS:
            quantize = (
                None if quantization is None else lambda graph: quantization.quantized(graph, self.weights, signature)
            )
            _PROGRAMS[key] = (self.module, lower(self.module, args, quantize))
        return _PROGRAMS[key][1]

    def __call__(self, *args: Any) -> Any:
        if self.quantization is not None and self.quantization.recording:
            self.quantization.record(self.weights, _signature(args), [t.contiguous() for t in _tensors(args)[0]])
            return self.module(*args)
        program = self.program(args)
        outputs = program.method.execute([tensor.contiguous() for tensor in _tensors(args)[0]])
        # the method's output buffers are reused by its next call: keep copies
        return pytree.tree_unflatten([output.clone() for output in outputs], program.out_spec)

    def programs(self) -> list[LoweredProgram]:
        """Every program lowered for this stage so far."""
        return [program for (weights, *_), (_, program) in _PROGRAMS.items() if weights == self.weights]


def runs_on_npu(stage: nn.Module) -> bool:
    """Whether ``stage`` is deployed (a stage that only fills an empty tensor, like a model's missing
    per-layer inputs, stays on the CPU side)."""
    return getattr(stage, "runs_on_npu", True)


def backend_stages(stages: Any, backend: str, quantization: Any = None) -> Any:
    """What the runtime's glue calls: ``stages`` (the PyTorch :class:`~gemma4_static.npu.stages.Stages`)
    themselves, or a copy whose every stage runs through ExecuTorch (the stages ``quantization``
    quantizes as quantized programs)."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "torch":
        return stages
    if importlib.util.find_spec("executorch") is None:
        raise ValueError(f"backend={backend!r} needs the executorch extra: pip install 'gemma4-static[executorch]'")

    def wrap(name: str, stage: nn.Module | None) -> EdgeStage | nn.Module | None:
        if stage is None or not runs_on_npu(stage):
            return stage
        return EdgeStage(
            name, stage, quantization if quantization is not None and quantization.quantizes(stage) else None
        )

    return dataclasses.replace(
        stages,
        embedding=wrap("token_embedding", stages.embedding),
        per_layer_inputs=wrap("per_layer_inputs", stages.per_layer_inputs),
        vision=wrap("vision_prefill", stages.vision),
        fusions=tuple(wrap(f"fusion{index}", fusion) for index, fusion in enumerate(stages.fusions)),
        layers=tuple(wrap(f"layer{index:02d}", layer) for index, layer in enumerate(stages.layers)),
        lm_head=wrap("lm_head", stages.lm_head),
    )
