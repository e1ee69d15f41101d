"""This project's runtime itself: the check groups that read its internals (its chunk mask tables,
its overflow hooks) judge only a port that declares them, :class:`~..static.StaticRuntimePort` (its
``runtime`` is a :class:`~gemma4_static.runtime.StaticGemma4Runtime`). Declared, no method: on any
other port those groups are one SKIP row each."""

from __future__ import annotations

from . import Capability

MIXIN = None
NAME = "this project's runtime internals"
RUNTIME_INTERNALS = Capability(
    NAME,
    None,
    declared=lambda port: NAME in getattr(port, "declares", ()),
    doc="Declared in ``declares``: the port is this project's runtime, whose internals (chunk mask tables, "
    "overflow hooks) some groups read.",
    absent=("runtime internals", "reads this project's runtime itself; {port} is another port"),
)
CAPABILITIES = (RUNTIME_INTERNALS,)
