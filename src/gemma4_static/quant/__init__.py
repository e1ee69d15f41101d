"""Integer profiles: a quantization scheme (:mod:`.schemes`) simulated on the runtime's stages with
PyTorch's fake-quantize ops and observers (:mod:`.fake_quant`), at named sites grouped by stage,
layer and projection kind (:mod:`.sites`), calibrated on sample prompts (:mod:`.profile`). On
ExecuTorch, XNNPACK's own PT2E quantization of each program:
:mod:`gemma4_static.executorch.xnnpack_quant`."""

from .profile import QuantProfile, quantize
from .schemes import SCHEMES, Scheme, parse_scheme

__all__ = ["SCHEMES", "QuantProfile", "Scheme", "parse_scheme", "quantize"]
