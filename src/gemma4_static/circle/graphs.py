"""A stage as a Circle graph: ``tico.convert`` of the stage called with its flat list of tensors
(:mod:`..npu.flat_call`), kept in the program cache by content (the exported graph, its weights,
TICO's version and configuration, this module's and its rewrites' source), and executed by onert, which takes and
returns numpy arrays in the graph's input order. ``tico`` and ``onert`` are imported only here."""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import pkgutil
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from ..executorch.program_cache import cache_folder, content_key, stored
from ..npu.flat_call import FlatInputs, flat_tensors
from .decompositions import circle_rewrites


def circle_missing() -> str | None:
    """What Circle graphs need that is not installed here (the packages and the extra that brings
    them), or ``None``."""
    missing = [name for name in ("tico", "onert") if importlib.util.find_spec(name) is None]
    if not missing:
        return None
    wheels = "onert has wheels for CPython 3.10 to 3.12"
    return f"the circle extra ({' and '.join(missing)} not installed; {wheels}): pip install 'gemma4-static[circle]'"


@dataclass(frozen=True)
class CircleGraph:
    """A converted stage: the ``.circle`` file's bytes and where they are on disk (onert loads a path)."""

    buffer: bytes
    path: Path


def convert(
    module: nn.Module,
    args: tuple,
    *,
    label: str,
    config: dict[str, bool] | None = None,
    disabled: tuple[str, ...] = (),
    rewrites: bool = True,
) -> CircleGraph:
    """``module`` at the static signature of ``args`` as a Circle graph, through the cache; ``config``:
    TICO's compile options (``CompileConfigV1`` field -> value) over its defaults; ``disabled``: TICO
    passes (class names in ``tico.passes``) that do nothing in this conversion; ``rewrites``: export
    under :func:`.decompositions.circle_rewrites` (``False``: the module as it is, as its own
    toolchain would convert it)."""
    import tico
    from tico.config.v1 import CompileConfigV1

    tensors, spec, fixed = flat_tensors(args)
    example = tuple(tensor.contiguous() for tensor in tensors)
    flat = FlatInputs(module, spec, fixed).eval()
    with torch.no_grad(), circle_rewrites() if rewrites else contextlib.nullcontext():
        exported = torch.export.export(flat, example, strict=False)
    options = {**dict(sorted((config or {}).items())), "disabled passes": tuple(sorted(disabled))}
    sources = tuple(Path(__file__).with_name(name).read_bytes() for name in ("graphs.py", "decompositions.py"))
    toolchain = (torch.__version__, metadata.version("tico"), *sources)

    def build() -> tuple[bytes, dict[str, Any]]:
        compile_config = CompileConfigV1()
        for name, enabled in (config or {}).items():
            compile_config.set(name, enabled)
        with passes_disabled(disabled):
            return bytes(tico.convert_from_exported_program(exported, config=compile_config).circle_binary), {}

    key = content_key({"forward": exported}, options, toolchain)
    buffer, _ = stored(key, build, label=label, suffix=".circle")
    return CircleGraph(buffer, _on_disk(buffer, key))


@contextlib.contextmanager
def passes_disabled(names: tuple[str, ...]) -> Iterator[None]:
    """TICO's passes ``names`` (classes of the ``tico.passes`` modules) doing nothing while the block
    runs; a ``ValueError`` for a name no module defines."""
    import tico.passes
    from tico.utils.passes import PassResult

    if not names:
        yield
        return
    found = {}
    for info in pkgutil.iter_modules(tico.passes.__path__):
        passes = importlib.import_module(f"tico.passes.{info.name}")
        found |= {name: getattr(passes, name) for name in names if isinstance(getattr(passes, name, None), type)}
    if unknown := sorted(set(names) - set(found)):
        raise ValueError(f"disabled must name passes of tico.passes, got {unknown}")
    saved = {name: cls.call for name, cls in found.items()}
    try:
        for cls in found.values():
            cls.call = lambda self, exported_program: PassResult(False)
        yield
    finally:
        for name, cls in found.items():
            cls.call = saved[name]


def _on_disk(buffer: bytes, key: str) -> Path:
    """Where onert can load ``buffer`` from: the cache's file, or (no disk cache) a file of this
    process's own."""
    folder = cache_folder()
    if folder is not None:
        return folder / f"{key}.circle"
    import tempfile

    path = Path(tempfile.gettempdir()) / "gemma4-static-circle" / f"{hashlib.sha256(buffer).hexdigest()}.circle"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        path.write_bytes(buffer)
    return path


def refusals() -> tuple[type[Exception], ...]:
    """The exceptions by which TICO refuses to convert a graph (``CircleExirError``: an operator it does
    not support, ...) and onert refuses to load or run one (``OnertError``)."""
    from onert.native.libnnfw_api_pybind.exception import OnertError
    from tico.utils.errors import CircleExirError

    return CircleExirError, OnertError


class CircleSession:
    """A Circle graph loaded in onert's CPU backend, called with tensors, returning tensors."""

    def __init__(self, graph: CircleGraph) -> None:
        from onert import infer

        self.graph, self.session = graph, infer.session(str(graph.path), "cpu")

    def __call__(self, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        arrays = [np.ascontiguousarray(tensor.detach().numpy()) for tensor in tensors]
        return [torch.from_numpy(np.array(output, copy=True)) for output in self.session.infer(arrays)]
