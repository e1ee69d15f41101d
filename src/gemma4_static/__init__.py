"""gemma4-static: a static-shape runtime for Gemma 4 and its parity checks against transformers."""

from .config import FULL_ATTENTION, SLIDING_ATTENTION, TextConfigView, read_text_config
from .inputs import StaticLayout
from .masks import (
    build_chunk_bool_masks,
    build_chunk_masks,
    build_decode_bool_masks,
    build_decode_masks,
    build_prefill_bool_masks,
    build_prefill_masks,
    to_additive,
)
from .rope import RopeTables, build_rope, inverse_frequencies
from .runtime import StaticGemma4Runtime

__all__ = [
    "FULL_ATTENTION",
    "SLIDING_ATTENTION",
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
