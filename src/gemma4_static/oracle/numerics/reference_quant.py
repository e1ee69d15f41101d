"""An integer scheme's arithmetic from a second implementation: torchao's affine quantization
primitives (``choose_qparams_affine``, ``quantize_affine``, ``dequantize_affine``), never this
project's :mod:`gemma4_static.quant` (PyTorch's observers and fake-quantize ops). The oracle builds
HF's same-scheme model with these, and the tests hold :mod:`gemma4_static.quant` to them directly:
a bug in either implementation moves one side only.

Conventions (the scheme's, :mod:`gemma4_static.quant.schemes`): weights symmetric (zero point 0)
with one scale per row, or per ``group_size`` consecutive columns of a row when the row's width is
a multiple of it; activations asymmetric per tensor, their range the min and max over calibration,
widened to hold 0. Scales are floored at float32's machine epsilon, as PyTorch's observers floor them.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

SCALE_FLOOR = torch.finfo(torch.float32).eps  # PyTorch's observers' floor (torchao's default is lower)


@functools.cache
def torchao_quantization() -> Any:
    """``torchao.quantization`` (an ``ImportError`` naming the extra that installs it; its warnings
    are silenced by :mod:`gemma4_static.oracle`)."""
    try:
        from torchao import quantization
    except ImportError as error:
        raise ImportError(
            "an integer profile's reference is built with torchao: pip install 'gemma4-static[verify]'"
        ) from error
    return quantization


def _primitives() -> Any:
    return torchao_quantization().quant_primitives


def integer_range(bits: int) -> tuple[int, int]:
    """``(low, high)`` of a signed integer of ``bits`` (``(-8, 7)`` for 4), stated here again: the
    reference takes nothing from the implementation it checks."""
    if not isinstance(bits, int) or not 2 <= bits <= 16:
        raise ValueError(f"bits must be an int in [2, 16], got {bits!r}")
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def _storage(bits: int) -> torch.dtype:
    return torch.int8 if bits <= 8 else torch.int16


def weight_block(weight: torch.Tensor, group_size: int | None, per_tensor: bool = False) -> tuple[int, int]:
    """torchao's ``block_size`` for ``weight (rows, columns)``: one row, or ``group_size`` columns of
    a row when ``columns`` is a multiple of it; the whole tensor ``per_tensor``."""
    rows, columns = weight.shape
    if per_tensor:
        return rows, columns
    return 1, group_size if group_size is not None and columns % group_size == 0 else columns


def reference_weight(
    weight: torch.Tensor, bits: int, group_size: int | None = None, per_tensor: bool = False
) -> torch.Tensor:
    """``weight (rows, columns)`` quantized and dequantized by torchao (same shape and dtype), one
    scale per row, per group or (``per_tensor``) for the whole tensor."""
    primitives, (low, high) = _primitives(), integer_range(bits)
    block, values = weight_block(weight, group_size, per_tensor), weight.detach().float()
    if block[1] == 1:  # torchao reduces a one-element block over the whole tensor: each value twice, same max
        return reference_weight(weight.repeat_interleave(2, dim=1), bits, 2)[:, ::2].contiguous()
    scale, zero_point = primitives.choose_qparams_affine(
        values, primitives.MappingType.SYMMETRIC, block, _storage(bits), low, high, eps=SCALE_FLOOR, keepdim=True
    )
    affine = (block, scale, zero_point, _storage(bits), low, high)
    return primitives.dequantize_affine(primitives.quantize_affine(values, *affine), *affine).to(weight.dtype)


class ReferenceActivation:
    """A static per-tensor quantizer of ``bits``, asymmetric (or ``symmetric``: zero point 0, the range
    ``+-max|x|``): :meth:`observe` (min and max over every tensor seen), then calling it quantizes and
    dequantizes with torchao at that range."""

    def __init__(self, bits: int, symmetric: bool = False) -> None:
        self.bits, (self.low, self.high), self.symmetric = bits, integer_range(bits), symmetric
        self.minimum, self.maximum = float("inf"), float("-inf")
        self._qparams: tuple[torch.Tensor, torch.Tensor] | None = None

    def observe(self, x: torch.Tensor) -> None:
        low, high = torch.aminmax(x.detach().float())
        self.minimum, self.maximum = min(self.minimum, low.item()), max(self.maximum, high.item())
        self._qparams = None

    @property
    def observed(self) -> bool:
        return self.minimum <= self.maximum

    def qparams(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(scale, zero_point)`` of the observed range (a ``ValueError`` before any tensor)."""
        if not self.observed:
            raise ValueError("the reference activation quantizer saw no calibration data")
        if self._qparams is None:
            self._qparams = self._chosen()
        return self._qparams

    def _chosen(self) -> tuple[torch.Tensor, torch.Tensor]:
        primitives = _primitives()
        return primitives.choose_qparams_affine_with_min_max(
            torch.tensor([self.minimum]),
            torch.tensor([self.maximum]),
            primitives.MappingType.SYMMETRIC if self.symmetric else primitives.MappingType.ASYMMETRIC,
            [1],
            torch.int32,
            self.low,
            self.high,
            eps=SCALE_FLOOR,
            zero_point_dtype=torch.int32,
        )

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        primitives = _primitives()
        scale, zero_point = self.qparams()
        flat = x.float().reshape(-1)
        affine = ((flat.numel(),), scale, zero_point, torch.int32, self.low, self.high)
        dequantized = primitives.dequantize_affine(primitives.quantize_affine(flat, *affine), *affine)
        return dequantized.reshape(x.shape).to(x.dtype)
