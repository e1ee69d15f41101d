"""The port interface as a core plus capabilities: whether a port has a capability is read from its
class (it overrides a method, or declares it), never by building it; a group that needs one a port
lacks is one SKIP row and builds nothing; adding a capability is one new module."""

from __future__ import annotations

import inspect

import pytest

from gemma4_static.oracle.flow.verify import verify
from gemma4_static.oracle.options import VerifyOptions
from gemma4_static.ports import Gemma4Port, ImageLimits, ImageProfile, PortLimits
from gemma4_static.ports.capabilities import Capability, capabilities, implemented, named
from gemma4_static.ports.capabilities.host_stages import DECODE_MASKS, MASK_VALUE, ROPE
from gemma4_static.ports.capabilities.image_profiles import IMAGE_PROFILES
from gemma4_static.ports.capabilities.runtime_internals import RUNTIME_INTERNALS
from gemma4_static.ports.core import PortCore
from gemma4_static.ports.static import StaticRuntimePort
from tests.unit.ports import port_adapters

BUILT: list[str] = []  # the ports CountingPort built


class Unbuildable(Gemma4Port):
    """Its factory raises: what it has must still be known."""

    name = "unbuildable"

    def __init__(self, model, setup):
        raise RuntimeError("never built")

    def decode_masks(self, attention_mask):
        raise AssertionError("never called")


class CountingPort(port_adapters.LogitsOnlyPort):
    """Prefill and decode only; counts every instance built."""

    name = "counting"

    def __init__(self, model, setup):
        BUILT.append(str(setup))
        super().__init__(model, setup)


def test_a_capability_is_read_from_the_class_never_by_a_build():
    assert implemented(Unbuildable, DECODE_MASKS) and not implemented(Unbuildable, MASK_VALUE)
    lacks = [capability.name for capability in capabilities() if not implemented(StaticRuntimePort, capability)]
    assert lacks == [
        "its calibrated ranges",  # its fake quantization's ranges are judged site by site instead
        "explanations of its known divergences",
        "its Circle graphs",  # its stages as Circle graphs are a backend of its own (circle-stages)
        "fixed image profiles",  # any image size at any slot
        "a verification flow of its own",
        "per-group quantization switches",  # its sweep switches its own profile's groups
    ]
    assert not any(implemented(port_adapters.NothingPort, capability) for capability in capabilities())
    assert implemented(StaticRuntimePort, RUNTIME_INTERNALS) and not implemented(Unbuildable, RUNTIME_INTERNALS)


def test_a_declared_capability_is_read_from_the_limits():
    profile = ImageProfile("one", (48, 48), budget=16, soft_tokens=9)

    class Profiled(Gemma4Port):
        limits = PortLimits(images=ImageLimits(accepted=True, profiles=(profile,)))

    assert implemented(Profiled, IMAGE_PROFILES) and not implemented(StaticRuntimePort, IMAGE_PROFILES)


def test_the_port_is_its_core_and_its_capabilities():
    """Every public method of a port is the core's or exactly one capability's, and each default says
    which capability is missing."""
    public = {name for name, _ in inspect.getmembers(Gemma4Port, inspect.isfunction) if not name.startswith("_")}
    core = {name for name, _ in inspect.getmembers(PortCore, inspect.isfunction) if not name.startswith("_")}
    owned = [method for capability in capabilities() for method in capability.methods]
    assert len(owned) == len(set(owned)) and public == core | set(owned)
    assert named("decode masks") is DECODE_MASKS
    with pytest.raises(ValueError, match=r"no capability named 'decode mask'; expected one of \["):
        named("decode mask")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "capability 'x' needs methods or a declared predicate, not both or neither"),
        ({"methods": ("rope",), "declared": bool}, "needs methods or a declared predicate, not both or neither"),
        ({"methods": ("no_such",)}, "capability 'x' names methods its mixin lacks: ['no_such']"),
    ],
)
def test_a_bad_capability_is_a_clear_error(kwargs, message):
    with pytest.raises(ValueError) as raised:
        Capability("x", ROPE.mixin, **kwargs)
    assert message in str(raised.value)


def test_a_group_that_needs_a_missing_capability_builds_nothing(tiny_model):
    """Each group that needs a capability the port lacks is one SKIP row naming it; the only ports
    built are the sample setup's (the groups that run build their own)."""
    BUILT.clear()
    options = VerifyOptions(port=f"{__name__}:CountingPort", groups=("decode-masks", "mask-value", "export"))
    rows = verify(tiny_model, options).rows
    assert [(row.group, row.status, row.skipped) for row in rows] == [
        ("decode-masks", "SKIP", "counting does not expose decode masks"),
        ("mask-value", "SKIP", "counting does not expose its additive mask value"),
        ("export", "SKIP", "counting does not expose its export modules"),
    ]
    assert len(BUILT) == 1, BUILT  # the sample setup's port alone


@pytest.mark.xdist_group("extended-package")  # one worker copies the package for both
def test_adding_a_capability_is_one_new_module(extended_package):
    """The porting guide's example capability, dropped into a copy of the package's capabilities
    folder: every port has its default (saying what is missing), a port overriding it has it, and
    new-port's skeleton and the porting guide's table list it."""
    _, said = extended_package
    assert said["default"] == "unnamed port does not expose its memory report"
    assert said["implemented"] == [True, False] and said["skeleton"]
    (row,) = said["capabilities table"]
    assert "`memory_bytes`" in row and "The bytes its weights and caches hold." in row
