"""Ports by name: the built-in ones, or any ``package.module:factory`` a user names.

A factory is called as ``factory(model, setup)`` (an HF Gemma 4 model and a
:class:`~.base.PortSetup`) and returns a :class:`~.base.Gemma4Port`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from .base import Gemma4Port, PortSetup

Factory = Callable[[Any, PortSetup], Gemma4Port]

# name -> "module:factory" (imported only when asked for: a port's own dependencies stay optional)
BUILT_IN = {
    "gemma4-static": "gemma4_static.ports.static:StaticRuntimePort",
    "executorch-gemma4": "gemma4_static.ports.executorch_gemma4:ExecuTorchGemma4Port",
    "qnn-gemma4": "gemma4_static.ports.qnn_gemma4:QnnGemma4Port",
}
DEFAULT_PORT = "gemma4-static"


def port_factory(name: str) -> Factory:
    """The factory of a built-in port (:data:`BUILT_IN`) or of ``package.module:factory``; a
    ``ValueError`` naming the port when it cannot be found or imported (a missing optional
    dependency says which extra installs it)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"port must be a built-in name {sorted(BUILT_IN)} or 'package.module:factory', got {name!r}")
    target = BUILT_IN.get(name, name)
    module_name, _, attribute = target.partition(":")
    if not attribute:
        raise ValueError(f"port must be a built-in name {sorted(BUILT_IN)} or 'package.module:factory', got {name!r}")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        hint = " (install the ports extra: pip install 'gemma4-static[ports]')" if name in BUILT_IN else ""
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
