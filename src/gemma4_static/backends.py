"""Backends by name: what runs a runtime's stages, and the one place that reads a backend name.

``torch``: the PyTorch stage modules themselves (integer profiles as fake-quantized modules);
``torch-packed``: the same modules, their decoder projections and LM head computed over weights
oneDNN reorders once into its kernels' layout (:mod:`.npu.packed`: a copy of those weights, a
faster decode on x86 CPUs; float only);
``executorch-stages``: every deployed stage its own ExecuTorch program, the KV cache passed in and
out (:mod:`.executorch.stage_programs`); ``executorch``: the text model as one program with the KV cache inside
it (:mod:`.executorch.cache_program`), images through the vision and fusion stage programs; ``circle-stages``:
every deployed stage a Circle graph converted by TICO and run by onert (:mod:`.circle.stages`), in
float. Integer profiles on either ExecuTorch backend are XNNPACK's own PT2E quantization
(:mod:`.executorch.xnnpack_quant`)."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what runs a backend is imported where it runs: reading the names imports no torch
    from .executorch.cache_program import CacheProgram
    from .executorch.xnnpack_quant import XnnpackQuantization
    from .quant import QuantProfile
    from .stack import LayerStack


@dataclass(frozen=True)
class Backend:
    """A named backend: whether its stages are compiled programs, and whether the text model is one
    program with the cache inside (``in_program``); ``toolchain``: what compiles and runs the
    programs (``executorch``, or ``circle``: TICO and onert)."""

    name: str
    programs: bool
    in_program: bool
    toolchain: str = "executorch"
    packed: bool = False

    @property
    def eager(self) -> bool:
        """Whether the stages run as PyTorch modules (``torch``, ``torch-packed``)."""
        return not self.programs

    def quantization(self, modules: Any, quant: str | None) -> QuantProfile | XnnpackQuantization | None:
        """The integer profile ``quant`` of a runtime's stage ``modules``: fake-quantized PyTorch
        stages, or quantized XNNPACK programs; ``None`` without ``quant``."""
        if quant is None:
            return None
        if self.toolchain == "circle":
            raise ValueError(
                f"backend={self.name!r} runs float graphs (onert runs no int16 Circle), got quant={quant!r}"
            )
        if self.packed:
            raise ValueError(f"backend={self.name!r} runs float weights (use backend='torch'), got quant={quant!r}")
        from .quant import parse_scheme, quantize

        scheme = parse_scheme(quant)
        if not self.programs:
            return quantize(modules, scheme)
        from .executorch.xnnpack_quant import XnnpackQuantization

        return XnnpackQuantization(scheme)

    def stages(self, modules: Any, quantization: Any = None) -> Any:
        """What the runtime's glue calls: the PyTorch ``modules`` themselves, or their stage programs."""
        if self.toolchain == "circle":
            from .circle.stages import circle_stages

            return circle_stages(modules)
        if self.packed:
            from .npu.packed import pack_projections

            pack_projections(modules)
        if not self.programs:
            return modules
        from .executorch.stage_programs import stage_programs

        return stage_programs(modules, quantization)

    def program(self, modules: Any, stack: LayerStack, quantization: Any = None) -> CacheProgram | None:
        """The one-program form of the text stages (``in_program``), else ``None``."""
        if not self.in_program:
            return None
        from .executorch.cache_program import CacheProgram

        return CacheProgram(modules, stack, quantization)


BACKENDS = {
    backend.name: backend
    for backend in (
        Backend("torch", programs=False, in_program=False),
        Backend("torch-packed", programs=False, in_program=False, packed=True),
        Backend("executorch", programs=True, in_program=True),
        Backend("executorch-stages", programs=True, in_program=False),
        Backend("circle-stages", programs=True, in_program=False, toolchain="circle"),
    )
}


def backend_named(name: str | Backend) -> Backend:
    """The backend ``name`` (a :class:`Backend` is returned as it is); a ``ValueError`` naming the
    known ones, or the extra an ExecuTorch backend needs when ``executorch`` is not installed."""
    if isinstance(name, Backend):
        return name
    if name not in BACKENDS:
        raise ValueError(f"backend must be one of {tuple(BACKENDS)}, got {name!r}")
    backend = BACKENDS[name]
    if backend.toolchain == "circle":
        from .circle.graphs import circle_missing

        if missing := circle_missing():
            raise ValueError(f"backend={name!r} needs {missing}")
    elif backend.programs and importlib.util.find_spec("executorch") is None:
        raise ValueError(f"backend={name!r} needs the executorch extra: pip install 'gemma4-static[executorch]'")
    return backend
