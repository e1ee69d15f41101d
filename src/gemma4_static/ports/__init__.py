"""Ports: Gemma 4 implementations seen through one interface (:mod:`.base`), found by name (:mod:`.registry`):
this project's runtime (:mod:`.static`), ExecuTorch's Gemma 4 (:mod:`.executorch_gemma4`) and Qualcomm's static
QNN Gemma 4 (:mod:`.qnn_gemma4`), with helpers for adapters (:mod:`.checkpoint_layout`, :mod:`.hooks`).

An adapter imports what it implements from here: ``from gemma4_static.ports import Gemma4Port, NotExposed,
PortLimits, PortPrefill, PortSetup, Prompt``."""

from .base import Gemma4Port, NotExposed, PortLimits, PortPrefill, PortSetup
from .prompt import Prompt

__all__ = ["Gemma4Port", "NotExposed", "PortLimits", "PortPrefill", "PortSetup", "Prompt"]
