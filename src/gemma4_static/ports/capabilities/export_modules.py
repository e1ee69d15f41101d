"""The graphs a port exports: its NPU stages as modules, each with the inputs of one real call, so
the suite exports each with ``torch.export`` and checks that it replays its eager output; and the
graphs it ships as Circle files (TICO converts them), which the suite converts as its toolchain does
and runs in ONE's runtime."""

from __future__ import annotations

from ...export import StageCase
from ..core import not_exposed
from . import Capability


class ExportModules:
    """The optional export modules of :class:`~..port.Gemma4Port`."""

    def export_cases(self) -> list[StageCase]:
        """The graphs the port exports (:class:`~gemma4_static.export.StageCase`: name, module and the
        inputs of one real call each, e.g. captured in its last prefill and decode step); each is
        exported with ``torch.export`` and must replay its eager output."""
        raise not_exposed(self, EXPORT_MODULES.name)

    def circle_cases(self) -> list[StageCase]:
        """The graphs the port ships as Circle graphs, converted by ``tico.convert`` with TICO's default
        options (as :meth:`export_cases`: module and the inputs of one real call each); each is
        converted so, run in onert and compared with its module (as shipped, with onert's known limits
        worked around, with TICO's known bug fixed)."""
        raise not_exposed(self, CIRCLE_GRAPHS.name)


MIXIN = ExportModules
EXPORT_MODULES = Capability("its export modules", ExportModules, ("export_cases",), coverage="export round-trip")
CIRCLE_GRAPHS = Capability("its Circle graphs", ExportModules, ("circle_cases",), coverage="circle round-trip")
CAPABILITIES = (EXPORT_MODULES, CIRCLE_GRAPHS)
