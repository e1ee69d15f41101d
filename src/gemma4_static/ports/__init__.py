"""Ports: Gemma 4 implementations seen through one interface (:mod:`.base`, its optional host-side stages
:mod:`.host_stages`, what it accepts :mod:`.limits`, the images it takes :mod:`.images`, static schemes
:mod:`.calibration`), found by name
(:mod:`.registry`): this project's runtime (:mod:`.static`), ExecuTorch's Gemma 4 (:mod:`.executorch_gemma4`),
Qualcomm's static QNN Gemma 4 (:mod:`.qnn_gemma4`) and Samsung TICO's static Gemma 4 runtime
(:mod:`.tico_gemma4`), with helpers for adapters (:mod:`.checkpoint_layout`, :mod:`.hooks`).

An adapter imports what it implements from here: ``from gemma4_static.ports import Gemma4Port, ImageProfile,
NotExposed, PortLimits, PortPrefill, PortSetup, Prompt`` (and for a static scheme ``SchemeRecipe``,
``representable_range``)."""

from .base import Gemma4Port, NotExposed, OwnCheck, PortLimits, PortPrefill, PortSetup
from .calibration import SchemeRecipe, representable_range
from .images import ImageProfile
from .prompt import Prompt

__all__ = [
    "Gemma4Port",
    "ImageProfile",
    "NotExposed",
    "OwnCheck",
    "PortLimits",
    "PortPrefill",
    "PortSetup",
    "Prompt",
    "SchemeRecipe",
    "representable_range",
]
