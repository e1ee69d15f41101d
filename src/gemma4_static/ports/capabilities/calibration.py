"""Static integer schemes in a port: the calibration the suite hands it. In a static scheme
activation ranges are fixed before deployment; the suite gives the port the same calibration
prompts that calibrate HF's same-scheme reference, the port calibrates in its own recipe
(:meth:`Calibration.calibrate`, declared in ``limits.schemes``), and every check then judges the
calibrated port. A port that exposes the ranges it ended with (:meth:`Calibration.observed_ranges`)
has them shown beside HF's."""

from __future__ import annotations

from typing import Any

from ..core import not_exposed
from . import Capability


class Calibration:
    """A port's calibration in a static scheme, optional in :class:`~..port.Gemma4Port`."""

    def calibrate(self, prompts: list[Any]) -> None:
        """Calibrate in the scheme the port was built for (``PortSetup.quant``) over ``prompts``
        (:class:`~..prompt.Prompt`, as the port takes them), in its own recipe; from then on it runs
        quantized, with no conversation left (the next call must be a prefill). Called by the suite
        on every port it builds in a static scheme, before any check."""
        raise not_exposed(self, CALIBRATION.name)

    def observed_ranges(self) -> dict[str, tuple[float, float]]:
        """The activation range each site quantizes with after calibration, ``{site: (low, high)}`` by
        the suite's site names (``"layer 3 q_proj"``, ``"PLE projection"``, ``"LM head"``): what its
        frozen scale and zero point represent (:func:`representable_range`)."""
        raise not_exposed(self, OBSERVED_RANGES.name)


def representable_range(scale: float, zero_point: float, quant_min: int, quant_max: int) -> tuple[float, float]:
    """The range a per-tensor ``scale`` and ``zero_point`` represent over ``[quant_min, quant_max]``."""
    return (quant_min - zero_point) * scale, (quant_max - zero_point) * scale


MIXIN = Calibration
CALIBRATION = Capability(
    "calibration in a static scheme",
    Calibration,
    ("calibrate",),
    uses="every port instance a run builds in a static scheme, before any check",
)
OBSERVED_RANGES = Capability("its calibrated ranges", Calibration, ("observed_ranges",))
CAPABILITIES = (CALIBRATION, OBSERVED_RANGES)
