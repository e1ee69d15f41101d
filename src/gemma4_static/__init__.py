"""gemma4-static: a static-shape runtime for Gemma 4, checked stage by stage against transformers.

Its rooms and layers are the import contracts of ``pyproject.toml`` (the suite runs them), drawn on
the documentation's architecture page (``docs/architecture.md``): ``spec`` (the one Hugging Face
adapter) at the bottom, then the CPU side and the NPU stages, the stack, ``executorch``, the
runtime, export, the ports, the oracle (HF as the reference) and the commands on top.
"""

from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("gemma4-static")
except _metadata.PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+source"

from .cpu.layout import StaticLayout
from .cpu.masks import (
    build_chunk_bool_masks,
    build_chunk_masks,
    build_decode_bool_masks,
    build_decode_masks,
    build_prefill_bool_masks,
    build_prefill_masks,
    to_additive,
)
from .cpu.prefill_masks import PrefillMaskBuffers
from .cpu.rope import RopeTables, build_rope, inverse_frequencies
from .runtime import StaticGemma4Runtime
from .spec import FULL_ATTENTION, SLIDING_ATTENTION, TextConfigView, read_text_config

__all__ = [
    "FULL_ATTENTION",
    "SLIDING_ATTENTION",
    "PrefillMaskBuffers",
    "RopeTables",
    "StaticGemma4Runtime",
    "StaticLayout",
    "TextConfigView",
    "build_chunk_bool_masks",
    "build_chunk_masks",
    "build_decode_bool_masks",
    "build_decode_masks",
    "build_prefill_bool_masks",
    "build_prefill_masks",
    "build_rope",
    "inverse_frequencies",
    "read_text_config",
    "to_additive",
]
