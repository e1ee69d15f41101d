"""Static integer schemes in a port: the recipe a port declares for each (its own name for it, the
suite's scheme it is judged as, the granularity of its activations and weights), and the calibration
the suite hands it. In a static scheme activation ranges are fixed before deployment; the suite gives
the port the same calibration prompts that calibrate HF's same-scheme reference, the port calibrates
in its own recipe (:meth:`Calibration.calibrate`), and every check then judges the calibrated port.
A port that exposes the ranges it ended with (:meth:`Calibration.observed_ranges`) has them shown
beside HF's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

GRANULARITIES = ("per tensor", "per channel", "per group", "per token")


@dataclass(frozen=True)
class SchemeRecipe:
    """How a port runs suite scheme ``scheme`` (a name of :func:`~gemma4_static.quant.parse_scheme`):
    ``own_name`` its own name for the recipe; activations and weights each by bits, granularity (one
    of :data:`GRANULARITIES`) and symmetry; ``sites`` what it quantizes, in words;
    ``activation_clipping``: its activation observers clip outliers by design (a histogram or
    percentile observer), so its ranges may leave out part of what HF's forward produces."""

    scheme: str
    own_name: str
    activation_bits: int
    activation_granularity: str
    activation_symmetric: bool
    weight_bits: int
    weight_granularity: str
    weight_symmetric: bool
    sites: str = ""
    activation_clipping: bool = False

    def __post_init__(self) -> None:
        for name in ("activation_granularity", "weight_granularity"):
            if getattr(self, name) not in GRANULARITIES:
                raise ValueError(f"{name} must be one of {GRANULARITIES}, got {getattr(self, name)!r}")

    def describe(self) -> str:
        """One line: its own name, then its activations and weights."""

        def side(bits: int, granularity: str, symmetric: bool) -> str:
            return f"int{bits} {granularity}, {'symmetric' if symmetric else 'asymmetric'}"

        activations = side(self.activation_bits, self.activation_granularity, self.activation_symmetric)
        weights = side(self.weight_bits, self.weight_granularity, self.weight_symmetric)
        clipping = " (clipping observers)" if self.activation_clipping else ""
        sites = f"; {self.sites}" if self.sites else ""
        return f"{self.own_name}: activations {activations}{clipping}, weights {weights}{sites}"


class Calibration:
    """A port's calibration in a static scheme (mixed into :class:`~.base.Gemma4Port`: ``_missing``
    is the port's ``NotExposed`` naming the stage)."""

    def calibrate(self, prompts: list[Any]) -> None:
        """Calibrate in the scheme the port was built for (``PortSetup.quant``) over ``prompts``
        (:class:`~.prompt.Prompt`, as the port takes them), in its own recipe; from then on it runs
        quantized, with no conversation left (the next call must be a prefill). Called by the suite
        on every port it builds in a static scheme, before any check."""
        raise self._missing("calibration in a static scheme")

    def observed_ranges(self) -> dict[str, tuple[float, float]]:
        """The activation range each site quantizes with after calibration, ``{site: (low, high)}`` by
        the suite's site names (``"layer 3 q_proj"``, ``"PLE projection"``, ``"LM head"``): what its
        frozen scale and zero point represent (:func:`representable_range`)."""
        raise self._missing("its calibrated ranges")


def representable_range(scale: float, zero_point: float, quant_min: int, quant_max: int) -> tuple[float, float]:
    """The range a per-tensor ``scale`` and ``zero_point`` represent over ``[quant_min, quant_max]``."""
    return (quant_min - zero_point) * scale, (quant_max - zero_point) * scale
