"""The port interface a Gemma 4 implementation under test is adapted to: :class:`Gemma4Port`, the
core every verdict needs (:class:`~.core.PortCore`: limits, prefill, decode, generate, close) plus
every optional capability of :mod:`.capabilities` (host-side stages, export modules, calibration,
quantization groups, its own checks, explanations, a prefill policy), each defaulting to "not
exposed". A port overrides what it has; a check on a capability a port lacks is reported as skipped
with the reason, never as passed."""

from __future__ import annotations

from .capabilities import mixins
from .core import PortCore


class Gemma4Port(PortCore, *mixins()):
    """Base class of a port: :class:`~.core.PortCore` and every capability's mixin (the methods a
    port overrides; :func:`~.capabilities.implemented` says which it has).

    ``name`` and ``version`` identify it in reports; ``limits`` say what it accepts; ``declares``
    names the capabilities it declares rather than overrides (:mod:`.capabilities.runtime_internals`)."""

    declares: tuple[str, ...] = ()
