"""The optional capabilities of a port, one module each (the model is pluggy's hook specifications:
declared, optional, defaulted and documented one by one). A module holds a capability family's
mixin (its methods, each with a default that raises :class:`~..core.NotExposed` and a docstring
saying what it takes and returns) and its :class:`Capability` records. A port has a capability when
its class overrides one of the capability's methods, or declares it (:attr:`Capability.declared`):
known from the port itself, never by building it and calling it.

:class:`~..port.Gemma4Port` is :class:`~..core.PortCore` plus every mixin found here, so adding a
capability is one new module (and the check groups that use it, which name it in their ``needs``
or ``reads``); the porting guide's table and ``gemma4-static new-port``'s skeleton are generated
from :func:`capabilities`."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import Any


@dataclass(frozen=True)
class Capability:
    """A capability a port may have: its ``name`` as reports say it (``"decode masks"``: a port
    without it "does not expose decode masks"), the ``methods`` a port overrides to have it (on
    ``mixin``), or ``declared(port)`` where a port declares it instead (in its limits, say; ``doc``
    then says what it is). ``absent``: the check and the reason of the SKIP row a check group that
    needs it reports on a port without it (``{port}`` and ``{capability}`` filled in). ``uses``: what
    reads it beyond the check groups that name it. ``coverage``: the report stage that judges it,
    named in a verdict's coverage whenever compared (the stages a port builds on its host side)."""

    name: str
    mixin: type | None
    methods: tuple[str, ...] = ()
    declared: Callable[[Any], bool] | None = None
    doc: str = ""
    absent: tuple[str, str] = ("the rest of this group", "{port} does not expose {capability}")
    uses: str = ""
    coverage: str = ""

    def __post_init__(self) -> None:
        if (self.declared is None) == (not self.methods):
            raise ValueError(f"capability {self.name!r} needs methods or a declared predicate, not both or neither")
        missing = [method for method in self.methods if not hasattr(self.mixin, method)]
        if missing:
            raise ValueError(f"capability {self.name!r} names methods its mixin lacks: {missing}")

    @property
    def summary(self) -> str:
        """The first paragraph of its first method's docstring (a declared one: its ``doc``), in one line."""
        text = inspect.getdoc(getattr(self.mixin, self.methods[0])) if self.methods else self.doc
        return " ".join((text or "").split("\n\n")[0].split())

    def signatures(self) -> list[str]:
        """Each method's ``def`` line as a port overrides it (the ``new-port`` skeleton's stubs)."""
        return [f"def {method}{inspect.signature(getattr(self.mixin, method))}" for method in self.methods]


def implemented(port: Any, capability: Capability) -> bool:
    """Whether ``port`` (a port, or a port class) has ``capability``: it overrides one of its methods
    or declares it. Read from the class; nothing is built or called."""
    if capability.declared is not None:
        return bool(capability.declared(port))
    owner = port if isinstance(port, type) else type(port)
    return any(getattr(owner, method, None) is not getattr(capability.mixin, method) for method in capability.methods)


@cache
def modules() -> tuple[ModuleType, ...]:
    """The capability modules of this package, in name order."""
    found = sorted(info.name for info in pkgutil.iter_modules(__path__) if not info.name.startswith("_"))
    return tuple(importlib.import_module(f"{__name__}.{name}") for name in found)


def mixins() -> tuple[type, ...]:
    """Every capability module's mixin (``MIXIN``; a module whose capabilities are declared has none)."""
    return tuple(module.MIXIN for module in modules() if module.MIXIN is not None)


def capabilities() -> tuple[Capability, ...]:
    """Every capability, module by module (each module's ``CAPABILITIES``, in its order)."""
    return tuple(capability for module in modules() for capability in module.CAPABILITIES)


def named(name: str) -> Capability:
    """The capability called ``name``; a ``ValueError`` listing the names otherwise."""
    for capability in capabilities():
        if capability.name == name:
            return capability
    raise ValueError(f"no capability named {name!r}; expected one of {[c.name for c in capabilities()]}")
