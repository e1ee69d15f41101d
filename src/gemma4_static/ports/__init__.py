"""Ports: Gemma 4 implementations seen through one interface, :class:`~.port.Gemma4Port` (its core
:mod:`.core`, its optional capabilities :mod:`.capabilities`, what it accepts :mod:`.limits`, the
images it takes :mod:`.images`), found by name (:mod:`.registry`): this project's runtime
(:mod:`.static`, and standing in for another port's limits, :mod:`.stand_in`) and other projects'
runtimes, each in :mod:`.adapters` (ExecuTorch's Gemma 4, Qualcomm's static QNN Gemma 4, Samsung
TICO's static Gemma 4 runtime), with helpers for adapters (:mod:`.checkpoint_layout`, :mod:`.hooks`).

An adapter imports what it implements from here: ``from gemma4_static.ports import Gemma4Port,
BatchLimits, ImageLimits, ChunkLimits, ImageProfile, NotExposed, PortLimits, PortPrefill, PortSetup,
Prompt`` (and for a static scheme ``SchemeLimits``, ``SchemeRecipe``, ``representable_range``)."""

from .capabilities.calibration import representable_range
from .capabilities.own_checks import OwnCheck
from .core import NotExposed, PortPrefill, PortSetup
from .images import ImageProfile
from .limits import BatchLimits, ChunkLimits, Contracts, ImageLimits, PortLimits, SchemeLimits, SchemeRecipe
from .port import Gemma4Port
from .prompt import Prompt

__all__ = [
    "BatchLimits",
    "ChunkLimits",
    "Contracts",
    "Gemma4Port",
    "ImageLimits",
    "ImageProfile",
    "NotExposed",
    "OwnCheck",
    "PortLimits",
    "PortPrefill",
    "PortSetup",
    "Prompt",
    "SchemeLimits",
    "SchemeRecipe",
    "representable_range",
]
