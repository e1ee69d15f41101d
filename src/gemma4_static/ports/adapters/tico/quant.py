"""TICO's PTQ in the ``tico-gemma4`` port: its static schemes (its own PTQ specs, built by its own
``build_gemma4_e2b_ptq_config``), calibration as its wrappers do it (``enable_calibration``, its
runtime's own prefills over the suite's prompts, ``freeze_qparams``: QUANT mode), the ranges its
observers fixed, and a switch per group of its wrappers (QUANT or NO_QUANT) for the sensitivity sweep.

TICO's runtime builds its PTQ config itself, with no spec arguments (its default: ``affine(int16)``
for every activation and weight); for another scheme the port hands the builder the spec the way
``build_gemma4_e2b_ptq_config(activation=..., weight=...)`` takes it, for the runtime's construction."""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Callable, Iterator
from typing import Any

from ...capabilities.calibration import representable_range
from ...limits import SchemeRecipe

RUNTIME_MODULE = "tico.quantization.recipes.debug.static_gemma4_runtime"
SITES = "every activation its wrappers observe (norms, RoPE, attention scores and softmax, matmul inputs and outputs)"
RECIPES = tuple(
    SchemeRecipe(name, own, bits, "per tensor", True, bits, "per tensor", True, SITES)
    for name, own, bits in (
        ("a16w16t", "build_gemma4_e2b_ptq_config() (its default: affine(DType.int(16)))", 16),
        ("a8w8t", "build_gemma4_e2b_ptq_config(activation=affine(DType.int(8)), weight=affine(DType.int(8)))", 8),
    )
)
SCHEMES = tuple(recipe.scheme for recipe in RECIPES)
# TICO's linear wrappers' input observers, by the suite's site names (those HF's reference quantizes)
SITE_NAMES = (
    (re.compile(r"language_model\.layers\.(\d+)\.(?:self_attn|mlp)\.(\w+_proj)\.act_in$"), "layer {0} {1}"),
    (re.compile(r"language_model\.layers\.(\d+)\.per_layer_input_gate\.act_in$"), "layer {0} ple_gate"),
    (re.compile(r"language_model\.layers\.(\d+)\.per_layer_projection\.act_in$"), "layer {0} ple_projection"),
    (re.compile(r"language_model\.per_layer_model_projection\.act_in$"), "PLE projection"),
    (re.compile(r"vision_tower\.encoder\.layers\.(\d+)\.(?:self_attn|mlp)\.(\w+_proj)\.linear\.act_in$"),
     "vision layer {0} {1}"),
    (re.compile(r"^lm_head\.act_in$"), "LM head"),
)  # fmt: skip


@contextlib.contextmanager
def ptq_builder(scheme: str | None) -> Iterator[None]:
    """While the block runs, TICO's runtime builds its PTQ config for ``scheme`` (``None`` and its
    default ``a16w16t``: as it is)."""
    import importlib

    if scheme in (None, "a16w16t"):
        yield
        return
    from tico.quantization.config.specs import affine
    from tico.quantization.wrapq.dtypes import DType

    runtime_module = importlib.import_module(RUNTIME_MODULE)
    builder = runtime_module.build_gemma4_e2b_ptq_config
    bits = {"a8w8t": 8}[scheme]
    spec = affine(DType.int(bits))
    runtime_module.build_gemma4_e2b_ptq_config = functools.partial(builder, activation=spec, weight=spec)
    try:
        yield
    finally:
        runtime_module.build_gemma4_e2b_ptq_config = builder


def calibrate(qmodel: Any, run: Callable[[], None]) -> None:
    """TICO's calibration of its wrapped model: observers on, ``run()`` (its runtime's own prefills of
    the calibration prompts), then its ranges frozen into QUANT mode."""
    qmodel.enable_calibration()
    run()
    qmodel.freeze_qparams()


def observed_ranges(qmodel: Any) -> dict[str, tuple[float, float]]:
    """The input ranges its linear wrappers quantize with (their frozen scale and zero point), by the
    suite's site names."""
    ranges = {}
    for name, observer in qmodel.named_observers():
        for pattern, site in SITE_NAMES:
            found = pattern.search(name)
            if found and observer.has_qparams:
                scale, zero_point = observer.compute_qparams()
                dtype = observer.dtype
                ranges[site.format(*found.groups())] = representable_range(
                    float(scale), float(zero_point), dtype.qmin, dtype.qmax
                )
    return ranges


def groups(runtime: Any) -> dict[str, list[Any]]:
    """Its wrappers by group, in data-flow order: the vision tower, the tables, the PLE projection,
    each decoder layer, the final norm and LM head."""
    wrapped = runtime._wrapped_model
    text = runtime.text_model
    found = {"vision tower": [wrapped.vision_tower, wrapped.embed_vision]}
    found["tables"] = [
        module for module in (text.embed_tokens, getattr(text, "embed_tokens_per_layer", None)) if module
    ]
    projection = getattr(text, "per_layer_model_projection", None)
    if projection is not None:
        found["PLE projection"] = [projection, text.per_layer_projection_norm]
    found.update({f"layer {index}": [layer] for index, layer in enumerate(text.layers)})
    found["LM head"] = [runtime.lm_head]  # the final norm and the head
    return found


def set_quantized(modules: list[Any], quantized: bool) -> None:
    """Every TICO wrapper inside ``modules`` to QUANT (its frozen ranges) or NO_QUANT (float)."""
    from tico.quantization.wrapq.mode import Mode
    from tico.quantization.wrapq.wrappers.quant_module_base import QuantModuleBase

    for module in modules:
        for wrapper in module.modules():
            if isinstance(wrapper, QuantModuleBase):
                wrapper._mode = Mode.QUANT if quantized else Mode.NO_QUANT
