"""This runtime standing in for another port (``stand-in:NAME``): built under that port's declared
limits, so a verify asks HF what it would ask judging that port (the sample prompt, the setups, the
grid's cases follow from a port's limits). ``gemma4-static record`` records a port's reference this
way without building the port (no lowering, no device)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from .core import PortSetup
from .limits import SchemeLimits
from .port import Gemma4Port
from .static import StaticRuntimePort

STAND_IN = "stand-in:"  # stand-in:NAME, this runtime under port NAME's declared limits


def stand_in_for(name: str, factory: Callable[[Any, PortSetup], Gemma4Port]) -> Callable[[Any, PortSetup], Gemma4Port]:
    """A factory of this runtime under the limits port ``name``'s ``factory`` declares (a
    ``ValueError`` when it declares none: they are known only from the port built)."""
    limits = getattr(factory, "limits", None)
    if limits is None or isinstance(limits, property):
        raise ValueError(
            f"port {name!r} declares no limits before it is built: record it on the port itself (record --live)"
        )
    limits = dataclasses.replace(limits, schemes=SchemeLimits())

    def build(model: Any, setup: PortSetup) -> Gemma4Port:
        port = StaticRuntimePort(model, setup)
        port.limits = limits
        port.name = f"{STAND_IN}{name}"
        return port

    build.limits = limits
    return build
