"""Fixed static image profiles: a port whose vision tower is compiled for one patch grid, fusing its
soft tokens at fixed slots, declares the profiles it takes in ``limits.images.profiles``
(:class:`~..images.ImageProfile`); the suite then builds every image prompt it gives that port inside
its first profile instead of skipping what the port cannot take. Declared, no method."""

from __future__ import annotations

from . import Capability

MIXIN = None
IMAGE_PROFILES = Capability(
    "fixed image profiles",
    None,
    declared=lambda port: bool(port.limits.images.profiles),
    doc="Declared in ``limits.images.profiles``: the fixed static image profiles the port takes images in "
    "(the first is the suite's default); every image prompt it is given is built inside it.",
)
CAPABILITIES = (IMAGE_PROFILES,)
