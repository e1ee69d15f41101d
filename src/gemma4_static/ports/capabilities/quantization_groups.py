"""Per-group quantization switches: in an integer scheme, the groups a port can quantize or leave in
float one by one (its tables, ``"layer i"``, ``"LM head"``, ...), what a sensitivity sweep
(``verify --quant SCHEME --sensitivity``) needs of another port."""

from __future__ import annotations

from ..core import not_exposed
from . import Capability


class QuantizationGroups:
    """A port's per-group quantization switches, optional in :class:`~..port.Gemma4Port`."""

    def quantization_groups(self) -> tuple[str, ...]:
        """In an integer scheme, the groups it can quantize or leave in float one by one (tables,
        ``"layer i"``, ``"LM head"``, ...), in data-flow order: the switch a sensitivity sweep
        needs."""
        raise not_exposed(self, QUANTIZATION_GROUPS.name)

    def quantize_groups(self, groups: set[str]) -> None:
        """From the next prefill on: ``groups`` (names of :meth:`quantization_groups`) quantized,
        every other group in float."""
        raise not_exposed(self, QUANTIZATION_GROUPS.name)


MIXIN = QuantizationGroups
QUANTIZATION_GROUPS = Capability(
    "per-group quantization switches",
    QuantizationGroups,
    ("quantization_groups", "quantize_groups"),
    uses="verify --quant SCHEME --sensitivity (the sweep of another port)",
)
CAPABILITIES = (QUANTIZATION_GROUPS,)
