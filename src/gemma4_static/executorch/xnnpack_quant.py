"""The integer profiles ExecuTorch's XNNPACK backend runs: PT2E quantization with ExecuTorch's
``XNNPACKQuantizer`` of every stage program that holds projections (the decoder layers, the PLE
stage, the vision encoder; :mod:`gemma4_static.executorch.stage_programs`) or of the one-program form's methods
(:mod:`gemma4_static.executorch.cache_program`), then the usual XNNPACK lowering.

``a8w8`` maps to ``get_symmetric_quantization_config(is_per_channel=True)`` on ``aten.linear`` only:
int8 per-tensor activations at every projection's input *and output* (XNNPACK's static quantized
linear takes and returns int8), ranges from its histogram observer; int8 per-channel symmetric
weights (``[-127, 127]``). Norms, attention, residual adds stay float, as in the PyTorch profile.
XNNPACK has no 16-bit activations (``a16w8``, ``a16w4``) and no int8 embedding tables or separately
quantized LM head (``+e8``, ``+h8``): those run on this runtime's PyTorch stages only.

Calibration: while :meth:`XnnpackQuantization.calibrate` runs, every quantized stage (or the one
program's methods) runs in float PyTorch and records its inputs; a program at a recorded signature
(or method) is calibrated on them, at another (decode, a chunk) it takes the observers' state of a
calibrated one (the same projections in the same order: the ranges of a site do not depend on the
shapes). Buffers the calibration wrote (the one program's KV cache) are restored after it.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ..quant.schemes import Scheme

XNNPACK_SCHEMES = ("a8w8",)
QUANTIZED_STAGES = ("DecoderLayer", "PerLayerInputs", "VisionEncoder")  # the stages with projections


class XnnpackQuantization:
    """The PT2E state of one scheme across a runtime's programs (its stage programs, or its one
    program and the vision stage's): the inputs each recorded (per stage or program, and signature
    or method) and each calibrated one's observer states. Before :meth:`calibrate`, lowering a
    program is a ``ValueError``."""

    def __init__(self, scheme: Scheme) -> None:
        if scheme.name not in XNNPACK_SCHEMES:
            raise ValueError(
                f"quant scheme {scheme.name!r} does not run on XNNPACK (no 16-bit activations, no int8 embedding "
                f"tables or separate LM head there); XNNPACK runs {list(XNNPACK_SCHEMES)}, backend 'torch' all"
            )
        self.scheme = scheme
        self.recording = False
        self.samples: dict[tuple, list[tuple]] = {}
        self.observers: dict[Any, list[dict]] = {}
        self.calibration_seconds = 0.0

    @staticmethod
    def quantizes(module: nn.Module) -> bool:
        """Whether ``module``'s program is quantized (a stage with projections)."""
        return type(module).__name__ in QUANTIZED_STAGES

    def calibrate(self, run: Callable[[], Any], *, unreached: str = "error") -> None:
        """Record every quantized stage's inputs while ``run()`` runs the runtime (in float PyTorch);
        the programs are quantized and lowered at their first call after it. A stage ``run()`` never
        reached has no calibration: its first call is a ``ValueError`` (``unreached="error"``, the
        only policy of its programs)."""
        if unreached != "error":
            raise ValueError(f"unreached must be 'error' on XNNPACK (its only policy), got {unreached!r}")
        started = time.perf_counter()
        self.recording = True
        try:
            run()
        finally:
            self.recording = False
        self.calibration_seconds = time.perf_counter() - started

    def adopt(self, calibrated: XnnpackQuantization) -> None:
        """Take ``calibrated``'s recordings and observer states (another runtime of the same weights)."""
        self.samples, self.observers = calibrated.samples, calibrated.observers

    def record(self, stage: Any, signature: tuple, tensors: list[torch.Tensor]) -> None:
        self.samples.setdefault((stage, signature), []).append([tensor.detach().clone() for tensor in tensors])

    def quantized(self, graph: torch.fx.GraphModule, stage: Any, signature: tuple) -> torch.fx.GraphModule:
        """``graph`` (a stage exported at ``signature``, taking its flat tensors) with XNNPACK's
        quantize/dequantize pairs, its observers calibrated on that signature's recorded inputs or,
        without any, set from a calibrated signature of the same stage."""
        from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import get_symmetric_quantization_config
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

        config = get_symmetric_quantization_config(is_per_channel=True)
        initial = {name: buffer.clone() for name, buffer in graph.named_buffers()}  # e.g. the one program's cache
        prepared = prepare_pt2e(graph, xnnpack_quantizer().set_operator_type(torch.ops.aten.linear.default, config))
        observers = [module for name, module in prepared.named_modules() if "activation_post_process" in name]
        samples = self.samples.get((stage, signature), [])
        if samples:
            with torch.no_grad():
                for tensors in samples:
                    prepared(*tensors)
                for name, buffer in prepared.named_buffers():  # the program's own buffers start as they were
                    if name in initial:
                        buffer.copy_(initial[name])
            self.observers.setdefault(stage, [copy.deepcopy(observer.state_dict()) for observer in observers])
        elif stage in self.observers and len(self.observers[stage]) == len(observers):
            for observer, state in zip(observers, self.observers[stage], strict=True):
                observer.load_state_dict(state)
        else:
            raise ValueError(
                f"stage {stage[0]} at this signature has no calibration: calibrate the runtime before its first call"
            )
        return convert_pt2e(prepared)


def xnnpack_quantizer() -> Any:
    """ExecuTorch's ``XNNPACKQuantizer``, with one fix: before annotating, it turns every scalar of an
    ``add``/``mul`` into a float32 tensor, also in integer arithmetic (ExecuTorch 1.5), which makes the
    one program's cache-slot index math float and its ``index_put`` fail; such constants get the
    integer dtype of the node they feed back."""
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import XNNPACKQuantizer

    class IntegerScalarsKept(XNNPACKQuantizer):
        def transform_for_annotation(self, model: torch.fx.GraphModule) -> torch.fx.GraphModule:
            model = super().transform_for_annotation(model)
            arithmetic = (torch.ops.aten.add.Tensor, torch.ops.aten.mul.Tensor)
            for node in model.graph.nodes:
                if node.op != "call_function" or node.target not in arithmetic:
                    continue
                dtype = node.meta["val"].dtype
                for arg in node.args:
                    if not dtype.is_floating_point and isinstance(arg, torch.fx.Node) and arg.op == "get_attr":
                        model.register_buffer(arg.target, getattr(model, arg.target).to(dtype))
            return model

    return IntegerScalarsKept()
