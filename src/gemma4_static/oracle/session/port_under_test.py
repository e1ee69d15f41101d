"""What a run judges: :class:`PortUnderTest`, the port's name, its limits and capabilities, and one
factory that builds an instance for a setup with every option of the run already bound (this
runtime's backend and mask fill, the integer scheme, the calibration every instance takes). Every
port instance a run builds comes from it (the sample setup's, the chunked prefill's, the grid's,
the decode masks', the fuzzer's pool), so no check group can build one without an option of the run."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from ...executorch.xnnpack_quant import XnnpackQuantization
from ...ports import Gemma4Port, NotExposed, PortLimits, PortSetup
from ...ports.capabilities import Capability, capabilities, implemented
from ...ports.registry import build_port, port_factory
from ...ports.static import StaticRuntimePort
from ...quant import QuantProfile
from ..options import VerifyOptions
from .calibration import calibrate, calibration_prompts
from .port_calls import PortRaised

log = logging.getLogger(__name__)
Builder = Callable[[PortSetup], Gemma4Port]


def bound_builder(model: Any, options: VerifyOptions) -> Builder:
    """``options.port``'s factory with the run's options bound: ``setup -> port`` on ``model`` in
    ``options.quant`` (another port takes it as ``setup.quant``), this runtime on ``options.backend``
    with ``options.mask_value``. Whatever the factory raises is :class:`.port_calls.PortRaised` (with
    its traceback), but this runtime's ``ValueError`` naming one of its options (a usage error)."""
    own = port_factory(options.port) is StaticRuntimePort
    runtime_options = {"backend": options.backend, "mask_value": options.mask_value, "quant": options.quant}

    def build(setup: PortSetup) -> Gemma4Port:
        log.info("building port %s for %s", options.port, setup)
        try:
            if own:
                return StaticRuntimePort(model, setup, **runtime_options)
            return build_port(options.port, model, replace(setup, quant=options.quant))
        except Exception as error:
            if own and isinstance(error, ValueError):  # this runtime refusing the command line's own options
                raise
            raise PortRaised(options.port, setup, error) from error

    return build


@dataclass(frozen=True)
class PortUnderTest:
    """The port a run judges: ``name``, the ``limits`` and ``capabilities`` of its instances (read
    from the first one built, from its class: nothing is called to find them) and ``factory``, the
    run's :func:`bound_builder`. In an integer profile every instance is calibrated as the first was:
    this runtime adopts the first's calibrated ranges (``adopted``), another port in a static scheme
    calibrates in its own recipe on the suite's calibration prompts (``calibrates``, for ``config``)."""

    name: str
    limits: PortLimits
    capabilities: frozenset[str]
    factory: Builder
    config: Any
    adopted: QuantProfile | XnnpackQuantization | None = None
    calibrates: bool = False

    @classmethod
    def of(cls, port: Gemma4Port, factory: Builder, config: Any, **calibration: Any) -> PortUnderTest:
        """The port under test whose first instance is ``port`` (built by ``factory``)."""
        found = frozenset(capability.name for capability in capabilities() if implemented(port, capability))
        return cls(port.name, port.limits, found, factory, config, **calibration)

    def has(self, capability: Capability) -> bool:
        """Whether its instances have ``capability`` (:func:`~gemma4_static.ports.capabilities.implemented`)."""
        return capability.name in self.capabilities

    def build(self, setup: PortSetup) -> Gemma4Port:
        """An instance for ``setup`` (the caller closes it), calibrated as the run's first was."""
        port = self.factory(setup)
        try:
            if self.adopted is not None:
                port.runtime.quantization.adopt(self.adopted)
            elif self.calibrates:  # a port's static recipe: every port it builds calibrates
                calibrate(port, calibration_prompts(self.config, port.limits, setup), setup)
        except BaseException:
            port.close()
            raise
        return port

    @contextlib.contextmanager
    def built(self, setup: PortSetup) -> Iterator[Gemma4Port]:
        """An instance for ``setup`` (its static length at least the port's shortest, for its image's
        slot) while the block runs, closed after it; ``NotExposed`` when ``setup`` exceeds the port's
        ``max_seq``."""
        setup = replace(setup, max_seq=max(setup.max_seq, self.limits.shortest_static_length))
        if self.limits.max_seq is not None and setup.max_seq > self.limits.max_seq:
            raise NotExposed(f"{self.name} takes max_seq up to {self.limits.max_seq}; this check needs {setup.max_seq}")
        port = self.build(setup)
        try:
            yield port
        finally:
            port.close()
