"""The quantization mechanics, all PyTorch's own: min/max observers for the ranges and the
fake-quantize ops (quantize, round, clamp, dequantize in one op) for the values."""

from __future__ import annotations

import torch
from torch.ao.quantization.observer import MinMaxObserver, PerChannelMinMaxObserver


def signed_range(bits: int) -> tuple[int, int]:
    """``(quant_min, quant_max)`` of a signed integer of ``bits``: ``(-128, 127)`` for 8."""
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


def quantized_weight(weight: torch.Tensor, bits: int, group_size: int | None = None) -> torch.Tensor:
    """``weight (rows, columns)`` symmetrically quantized and dequantized (same shape and dtype): one
    scale per row, or per ``group_size`` consecutive columns of a row when ``columns`` is a multiple of it."""
    rows, columns = weight.shape
    groups = group_size if group_size is not None and columns % group_size == 0 else columns
    blocks = weight.detach().float().reshape(rows * columns // groups, groups)
    low, high = signed_range(bits)
    # qint8 with a narrower quant range is the observer's way to express int4 (and any bits <= 8)
    observer = PerChannelMinMaxObserver(
        ch_axis=0, dtype=torch.qint8, qscheme=torch.per_channel_symmetric, quant_min=low, quant_max=high
    )
    observer(blocks)
    scale, zero_point = observer.calculate_qparams()
    fake = torch.fake_quantize_per_channel_affine(blocks, scale.float(), zero_point.int(), 0, low, high)
    return fake.reshape(rows, columns).to(weight.dtype)


class ActivationQuantizer:
    """A static per-tensor asymmetric quantizer of ``bits``: :meth:`observe` tensors (calibration),
    then :meth:`freeze` the range; calling it fake-quantizes a tensor with that range."""

    def __init__(self, bits: int) -> None:
        self.bits = bits
        self.low, self.high = signed_range(bits)
        observed_dtype = torch.qint8 if bits <= 8 else torch.qint32
        self.observer = MinMaxObserver(
            dtype=observed_dtype, qscheme=torch.per_tensor_affine, quant_min=self.low, quant_max=self.high
        )
        self.scale: torch.Tensor | None = None
        self.zero_point: torch.Tensor | None = None

    def observe(self, x: torch.Tensor) -> None:
        self.observer(x.detach().float())

    @property
    def observed(self) -> bool:
        """Whether :meth:`observe` has seen a tensor."""
        return bool(torch.isfinite(self.observer.min_val))

    def freeze(self) -> None:
        """Fix the scale and zero point from everything observed (a ``ValueError`` if nothing was)."""
        if not self.observed:
            raise ValueError("an activation quantizer saw no calibration data: the calibration never reached it")
        scale, zero_point = self.observer.calculate_qparams()
        self.scale, self.zero_point = scale.float(), zero_point.int()

    def copy_range(self, other: ActivationQuantizer) -> None:
        """Take ``other``'s frozen range and what it observed (the same site of another runtime of the same model)."""
        self.scale, self.zero_point, self.observer = other.scale, other.zero_point, other.observer

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.scale is None:
            raise ValueError("the activation quantizer has no range yet: calibrate the runtime first")
        fake = torch.fake_quantize_per_tensor_affine(x.float(), self.scale, self.zero_point, self.low, self.high)
        return fake.to(x.dtype)
