"""Circle stages (the ``circle-stages`` backend): every NPU stage converted to a Circle graph by TICO
and executed by onert, behind the call signature of the PyTorch module it replaces, as the
``executorch-stages`` backend runs ExecuTorch programs. A stage is converted the first time it is
called with a static signature; graphs are kept by content in the program cache."""

from __future__ import annotations

from typing import Any

from torch import nn
from torch.utils import _pytree as pytree

from ..npu.flat_call import CompiledStage, call_signature, flat_tensors, output_structure
from ..npu.stages import compiled_stages
from .graphs import CircleSession, convert


class CircleStage(CompiledStage):
    """Calls ``module``'s Circle graph in onert for the signature it is called with (converted on
    first use)."""

    def __init__(self, name: str, module: nn.Module) -> None:
        super().__init__(name, module)
        self._loaded: dict[tuple, tuple[CircleSession, Any]] = {}

    def session(self, args: tuple) -> tuple[CircleSession, Any]:
        """The onert session of the graph for the signature of ``args``, and its output structure."""
        key = call_signature(args)
        if key not in self._loaded:
            graph = convert(self.module, args, label=f"{self.name} ({type(self.module).__qualname__})")
            self._loaded[key] = (CircleSession(graph), output_structure(self.module, args))
        return self._loaded[key]

    def __call__(self, *args: Any) -> Any:
        session, out_spec = self.session(args)
        return pytree.tree_unflatten(session(flat_tensors(args)[0]), out_spec)

    def graphs(self) -> list[CircleSession]:
        """The graphs this stage has loaded so far, one per signature it was called with."""
        return [session for session, _ in self._loaded.values()]


def circle_stages(stages: Any) -> Any:
    """A copy of ``stages`` (the PyTorch :class:`~gemma4_static.npu.stages.Stages`) whose every deployed
    stage runs as a Circle graph in onert."""
    return compiled_stages(stages, CircleStage)
