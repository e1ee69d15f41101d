"""Integer profiles: a quantization scheme (:mod:`.schemes`) simulated on the runtime's stages with
PyTorch's fake-quantize ops and observers (:mod:`.fake_quant`), at named sites grouped by stage,
layer and projection kind (:mod:`.sites`), calibrated on sample prompts (:mod:`.profile`); on
ExecuTorch, XNNPACK's own PT2E quantization of each stage program (:mod:`.xnnpack`)."""

from typing import Any

from .profile import QuantProfile, quantize
from .schemes import SCHEMES, Scheme, parse_scheme
from .xnnpack import XnnpackQuantization

__all__ = ["SCHEMES", "QuantProfile", "Scheme", "XnnpackQuantization", "parse_scheme", "quantization_of", "quantize"]


def quantization_of(stages: Any, quant: str | None, backend: str) -> QuantProfile | XnnpackQuantization | None:
    """The integer profile ``quant`` of a runtime's ``stages`` on ``backend``: fake-quantized PyTorch
    stages (``torch``), quantized XNNPACK programs (``executorch``, ``executorch-stages``); ``None``
    without ``quant``."""
    if quant is None:
        return None
    scheme = parse_scheme(quant)
    if backend == "torch":
        return quantize(stages, scheme)
    if backend in ("executorch", "executorch-stages"):
        return XnnpackQuantization(scheme)
    raise ValueError(f"quant runs on backend 'torch', 'executorch' or 'executorch-stages', got backend {backend!r}")
