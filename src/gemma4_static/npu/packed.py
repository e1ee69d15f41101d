"""Projections whose weights oneDNN reorders once into its matrix kernels' blocked layout.

A decode step is a row of matrix-vector products over every weight of the model: at a real size it
is bound by how fast those products read the weights. ``F.linear`` on a plain row-major ``(out, in)``
weight reads it at about half the machine's bandwidth on x86 CPUs (measured: 15.9 GB/s in float32,
19.3 GB/s in bfloat16 where a sum reads 33 GB/s); the same product over the weight reordered by
oneDNN for a batch of one reads it 1.2x (bfloat16) to 1.8x (float32) faster. This is what
``torch.compile``'s freezing does on CPU (``mkldnn._reorder_linear_weight`` once,
``mkldnn._linear_pointwise`` per call); here the two operators are called directly, in eager mode.

The reordered weight is a copy (one more byte per byte of the projections and the LM head); it is
made on first use, kept while its weight lives, shared by every runtime that reads that weight,
and made again when the weight changed (edited in place, or its storage swapped by ``.to(dtype)``).
"""

from __future__ import annotations

import os

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.weak import WeakIdKeyDictionary

from .stages import Stages

PACKED_DTYPES = (torch.float32, torch.bfloat16)
DECODE_BATCH = 1  # the batch size oneDNN lays the weight out for: one token per row in decode

_reordered: WeakIdKeyDictionary = WeakIdKeyDictionary()  # weight -> (what it held, its reordered copy)


def packing_missing(dtype: torch.dtype) -> str | None:
    """Why this machine cannot reorder weights of ``dtype`` (``None``: it can)."""
    if dtype not in PACKED_DTYPES:
        return f"oneDNN's reordered weights are {[str(d) for d in PACKED_DTYPES]} here, got {dtype}"
    if not torch.backends.mkldnn.is_available():
        return "this PyTorch build has no oneDNN (torch.backends.mkldnn.is_available() is False)"
    if dtype == torch.bfloat16 and not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        limit = os.environ.get("ONEDNN_MAX_CPU_ISA")
        where = "this CPU" if limit is None else f"this CPU with ONEDNN_MAX_CPU_ISA={limit}"
        return f"oneDNN has no bfloat16 kernels on {where} (they need AVX-512 BW/VL/DQ or AVX-NE-CONVERT)"
    return None


def _held(weight: torch.Tensor) -> tuple:
    """What ``weight`` holds, as far as a reordered copy goes stale: its storage, dtype, shape and
    version (an in-place edit moves the version; ``module.to(dtype)`` swaps the storage)."""
    return weight.data_ptr(), weight.dtype, weight.shape, weight._version


def reordered(weight: torch.Tensor) -> torch.Tensor:
    """``weight (out, in)`` in oneDNN's layout for a batch of :data:`DECODE_BATCH` rows, made once for
    what it holds."""
    kept = _reordered.get(weight)
    if kept is None or kept[0] != _held(weight):
        kept = (_held(weight), torch.ops.mkldnn._reorder_linear_weight(weight.detach(), DECODE_BATCH))
        _reordered[weight] = kept
    return kept[1]


def packed_linear(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``F.linear(x, weight)`` (no bias) over ``weight`` reordered: ``x (..., in)`` -> ``(..., out)``.
    Exported (a stage program), ``F.linear`` itself: the deployed stage is the same as on ``torch``."""
    if torch.compiler.is_exporting():
        return F.linear(x, weight)
    return torch.ops.mkldnn._linear_pointwise(x, reordered(weight), None, "none", [], "")


class PackedLinear(nn.Module):
    """A bias-free ``nn.Linear`` computed by :func:`packed_linear`; ``weight`` is the original (shared,
    not copied), kept for what reads a projection's shape and dtype."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.weight = linear.weight
        self.in_features, self.out_features = linear.in_features, linear.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return packed_linear(x, self.weight)


class PackedHeadMatmul(nn.Module):
    """The LM head's matmul (``HeadMatmul``'s signature) over the weight it is given, reordered."""

    def forward(self, normed: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return packed_linear(normed, weight)


def pack_projections(stages: Stages) -> None:
    """Every bias-free ``nn.Linear`` of the decoder layers of ``stages`` (a runtime's own stage
    modules, changed in place; the model's modules are not touched) and the LM head's matmul computed
    over reordered weights; a ``ValueError`` naming the reason where this machine cannot reorder a
    weight's dtype (nothing is changed then)."""
    projections = [
        (layer, name, child)
        for layer in stages.layers
        for name, child in layer.named_children()
        if type(child) is nn.Linear and child.bias is None
    ]
    for dtype in dict.fromkeys([stages.lm_head.weight.dtype, *(child.weight.dtype for *_, child in projections)]):
        if missing := packing_missing(dtype):
            raise ValueError(f"backend='torch-packed' cannot run here: {missing}")
    for layer, name, child in projections:
        setattr(layer, name, PackedLinear(child))
    stages.lm_head.matmul = PackedHeadMatmul()
