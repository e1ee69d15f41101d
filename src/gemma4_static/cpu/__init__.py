"""CPU side: everything dynamic, as plain tensors in and out (no ``nn.Module``, no ``transformers``).

``inputs`` (layout, padding, validation), ``rules``/``masks`` (attention masks per layer type),
``rope`` (cos/sin tables per layer type), ``cache`` (static KV buffers and lengths).
"""

from .cache import StaticKVCache
from .inputs import StaticInputs, StaticLayout, build_static_inputs
from .masks import (
    MaskTable,
    build_chunk_bool_masks,
    build_chunk_masks,
    build_decode_bool_masks,
    build_decode_masks,
    build_prefill_bool_masks,
    build_prefill_masks,
    mask_table,
    to_additive,
)
from .rope import RopeTables, build_rope, inverse_frequencies

__all__ = [
    "MaskTable",
    "RopeTables",
    "StaticInputs",
    "StaticKVCache",
    "StaticLayout",
    "build_chunk_bool_masks",
    "build_chunk_masks",
    "build_decode_bool_masks",
    "build_decode_masks",
    "build_prefill_bool_masks",
    "build_prefill_masks",
    "build_rope",
    "build_static_inputs",
    "inverse_frequencies",
    "mask_table",
    "to_additive",
]
