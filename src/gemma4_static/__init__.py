"""gemma4-static: a static-shape runtime for Gemma 4, checked stage by stage against transformers.

Its rooms and layers are the import contracts of ``pyproject.toml`` (the suite runs them), drawn on
the documentation's architecture page (``docs/architecture.md``): ``spec`` (the one Hugging Face
adapter) at the bottom, then the CPU side and the NPU stages, the stack, ``executorch``, the
runtime, export, the ports, the oracle (HF as the reference) and the commands on top.
"""

from importlib import import_module as _import_module
from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("gemma4-static")
except _metadata.PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+source"

# the public names and the module each comes from, imported when first asked for: importing the package
# (its pytest plugin, registered for every pytest session of an environment that has it) costs no torch
_HOMES = {
    "StaticLayout": "cpu.layout",
    "build_chunk_bool_masks": "cpu.masks",
    "build_chunk_masks": "cpu.masks",
    "build_decode_bool_masks": "cpu.masks",
    "build_decode_masks": "cpu.masks",
    "build_prefill_bool_masks": "cpu.masks",
    "build_prefill_masks": "cpu.masks",
    "to_additive": "cpu.masks",
    "PrefillMaskBuffers": "cpu.prefill_masks",
    "RopeTables": "cpu.rope",
    "build_rope": "cpu.rope",
    "inverse_frequencies": "cpu.rope",
    "StaticGemma4Runtime": "runtime",
    "FULL_ATTENTION": "spec",
    "SLIDING_ATTENTION": "spec",
    "TextConfigView": "spec",
    "read_text_config": "spec",
}


def __getattr__(name: str):
    """A public name (:data:`__all__`) from its module, imported on first use."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(_import_module(f"{__name__}.{_HOMES[name]}"), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})


__all__ = sorted(_HOMES)
