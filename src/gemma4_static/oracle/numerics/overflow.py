"""The overflow report: the largest ``|activation|`` of every stage and every projection of every
decoder layer over a run, and its headroom to the dtype's largest finite value.

Recorded with forward hooks on the runtime's own PyTorch stages while a block runs (the projections
are shared with the HF model, so hooks exist only inside the block); on the ExecuTorch backend the
stages run as programs whose activations Python cannot see, so nothing is recorded there. Names come in data-flow order
(first seen first); a value that is not finite is recorded as ``inf``. In fp16 the MLP product
``gelu(gate) * up`` (the ``down_proj`` input) is where Gemma 4's activations grow first.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from ...quant.profile import PER_LAYER_INPUT
from ...quant.profile import PROJECTIONS as LAYER_PROJECTIONS
from ..results.report import Row, merge

PROJECTIONS = (*LAYER_PROJECTIONS, *PER_LAYER_INPUT, "experts")
STAGES = ("embedding", "per_layer_inputs", "vision", "lm_head")


def _largest(value: Any) -> float:
    tensors = [value] if isinstance(value, torch.Tensor) else [v for v in value if isinstance(v, torch.Tensor)]
    largest = 0.0
    for tensor in tensors:
        if tensor.numel():
            peak = float(tensor.detach().abs().max())
            largest = max(largest, peak if peak == peak else float("inf"))  # NaN counts as overflow
    return largest


@contextlib.contextmanager
def recorded_ranges(runtime: Any, ranges: dict[str, float]) -> Iterator[dict[str, float]]:
    """Record into ``ranges`` (name -> max ``|x|``, running over calls) while the block runs ``runtime``."""

    def recorder(name: str, *, inputs: bool = False) -> Any:
        def hook(module: Any, args: tuple, output: Any = None) -> None:
            if torch.compiler.is_compiling():  # traced for export or lowering: no values to record
                return
            ranges[name] = max(ranges.get(name, 0.0), _largest(args if inputs else output))

        return hook

    handles = []
    modules = runtime.modules
    for stage in STAGES:
        module = getattr(modules, stage)
        if module is not None:
            handles.append(module.register_forward_hook(recorder(stage)))
    for fusion in modules.fusions:
        handles.append(fusion.register_forward_hook(recorder("fusion")))
    for index, layer in enumerate(modules.layers):
        for projection in PROJECTIONS:
            module = getattr(layer, projection)
            if module is not None:
                handles.append(module.register_forward_hook(recorder(f"layer {index} {projection}")))
        handles.append(
            layer.down_proj.register_forward_pre_hook(recorder(f"layer {index} down_proj input", inputs=True))
        )
        handles.append(layer.register_forward_hook(recorder(f"layer {index} output")))
    try:
        yield ranges
    finally:
        for handle in handles:
            handle.remove()


def overflow_rows(ranges: dict[str, float], dtype: torch.dtype) -> list[Row]:
    """One row per stage and per decoder layer (its largest sub-stage), in data-flow order: the max
    ``|x|`` against ``finfo(dtype).max``, the check naming the sub-stage and the headroom factor."""
    limit = torch.finfo(dtype).max
    groups: dict[str, list[Row]] = {}
    for name, largest in ranges.items():
        group = " ".join(name.split()[:2]) if name.startswith("layer ") else name
        headroom = limit / largest if largest else float("inf")
        row = Row("overflow", f"{name}, headroom {headroom:.3g}x", "max |x|", largest, limit)
        groups.setdefault(group, []).append(row)
    rows = []
    for group, members in groups.items():
        worst = max(members, key=lambda row: row.value)
        label = worst.check if not worst.failed else group
        rows.append(merge(members, "overflow", label))
    return rows
