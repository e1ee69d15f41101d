"""Ports by name: the built-in ones, any importable ``package.module:factory``, or a factory in a
file, ``path/to/adapter.py:factory`` (an adapter beside a script, no package needed).

A factory is called as ``factory(model, setup)`` (an HF Gemma 4 model and a
:class:`~.base.PortSetup`) and returns a :class:`~.base.Gemma4Port`.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from .core import PortSetup
from .limits import PortLimits
from .port import Gemma4Port
from .stand_in import STAND_IN, stand_in_for

Factory = Callable[[Any, PortSetup], Gemma4Port]

# name -> "module:factory" (imported only when asked for: a port's own dependencies stay optional)
BUILT_IN = {
    "gemma4-static": "gemma4_static.ports.static:StaticRuntimePort",
    "executorch-gemma4": "gemma4_static.ports.adapters.executorch.port:ExecuTorchGemma4Port",
    "qnn-gemma4": "gemma4_static.ports.adapters.qnn.port:QnnGemma4Port",
    "tico-gemma4": "gemma4_static.ports.adapters.tico.port:TicoGemma4Port",
}
# the extra that installs a built-in port's own dependencies
EXTRAS = {"executorch-gemma4": "ports", "qnn-gemma4": "ports", "tico-gemma4": "tico"}
DEFAULT_PORT = "gemma4-static"


def _import(module_name: str) -> ModuleType:
    """The module ``module_name``, or the file it names when it ends in ``.py``."""
    if not module_name.endswith(".py"):
        return importlib.import_module(module_name)
    path = Path(module_name)
    if not path.is_file():
        raise ModuleNotFoundError(f"no adapter file {module_name}")
    spec = importlib.util.spec_from_file_location(f"gemma4_port_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def port_factory(name: str) -> Factory:
    """The factory of a built-in port (:data:`BUILT_IN`), of ``package.module:factory`` or of
    ``path/to/file.py:factory``; a ``ValueError`` naming the port when it cannot be found or
    imported (a missing optional dependency says which extra installs it)."""
    expected = f"a built-in name {sorted(BUILT_IN)}, 'package.module:factory' or 'path/to/file.py:factory'"
    if not isinstance(name, str) or not name:
        raise ValueError(f"port must be {expected}, got {name!r}")
    if name.startswith(STAND_IN):  # this runtime under another port's limits (what record runs)
        return stand_in_for(name.removeprefix(STAND_IN), port_factory(name.removeprefix(STAND_IN)))
    target = BUILT_IN.get(name, name)
    module_name, _, attribute = target.rpartition(":")
    if not module_name or not attribute:
        raise ValueError(f"port must be {expected}, got {name!r}")
    try:
        module = _import(module_name)
    except ModuleNotFoundError as error:
        extra = EXTRAS.get(name)
        hint = f" (install the {extra} extra: pip install 'gemma4-static[{extra}]')" if extra else ""
        raise ValueError(f"port {name!r} cannot be imported: {error}{hint}") from None
    factory = getattr(module, attribute, None)
    if not callable(factory):
        raise ValueError(f"port {name!r}: {module_name} has no callable {attribute!r}")
    return factory


def build_port(name: str, model: Any, setup: PortSetup) -> Gemma4Port:
    """``port_factory(name)(model, setup)``, checked to be a :class:`~.base.Gemma4Port`."""
    port = port_factory(name)(model, setup)
    if not isinstance(port, Gemma4Port):
        raise ValueError(f"port {name!r} returned {type(port).__name__}, not a Gemma4Port")
    return port


def declared_limits(factory: Factory) -> PortLimits | None:
    """The limits a factory declares before it is called (a port class's ``limits``, or a ``limits``
    attribute of a factory function), or ``None``: then they are read from the port it builds."""
    limits = getattr(factory, "limits", None)
    return limits if isinstance(limits, PortLimits) else None
