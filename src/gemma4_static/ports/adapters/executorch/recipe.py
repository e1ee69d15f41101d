"""ExecuTorch's Gemma 4 in its export's integer recipes, for :mod:`.port`: the text
decoder quantized by its own ``quant_utils`` (``apply_embedding_quantization`` for ``+emb8``, then
``apply_linear_quantization``: torchao's ``quantize_`` through ExecuTorch's ``quantize_model_``),
and the per-group switches a sensitivity sweep needs (each quantized module beside its float one).
One change from its export, stated: int4 groups of 32 inputs where its export defaults to 128 (a
width 128 does not divide is left in float, and the embedded models are 64 wide)."""

from __future__ import annotations

import contextlib
import io
import logging
from typing import Any

import torch

from ....quant.schemes import PORT_SCHEMES, parse_scheme


def quantized_by_its_recipe(model: Any, quant: str) -> Any:
    """``model`` quantized as ExecuTorch's Gemma 4 export quantizes its text decoder (its
    ``quant_utils``; tables first, then the linears), groups of the scheme's size; what the recipe
    prints (each layer it skips) goes to the log."""
    from executorch.examples.models.gemma4.quant_utils import apply_embedding_quantization, apply_linear_quantization

    scheme = parse_scheme(quant)
    if quant not in PORT_SCHEMES:
        raise ValueError(f"quant must be one of {list(PORT_SCHEMES)} for executorch-gemma4, got {quant!r}")
    linear = quant.split("+")[0]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        if scheme.table_bits is not None:
            model = apply_embedding_quantization(model, "emb8").eval()
        model = apply_linear_quantization(model, linear, group_size=scheme.group_size or 0).eval()
    logging.getLogger(__name__).info("its recipe %s: %s", quant, printed.getvalue().strip())
    return model


def quantization_switches(quantized: Any, float_model: Any) -> dict[str, list[tuple[str, Any, Any]]]:
    """Per group (``"tables"``, ``"PLE projection"``, ``"layer i"`` in HF's numbering, ``"LM
    head"``), in the model's own (data-flow) order, each module its recipe quantized: its path, the
    quantized module and the float one (a module the recipe left in float, a width its groups do
    not divide, is in no group)."""
    offset = len(quantized.model.self_decoder.layers)
    floats = dict(float_model.named_modules())
    groups: dict[str, list[tuple[str, Any, Any]]] = {}
    for path, module in quantized.named_modules():
        original = floats.get(path)
        if original is None or not _quantized(module, original):
            continue
        parts = path.split(".")
        if "layers" in parts:
            group = f"layer {int(parts[parts.index('layers') + 1]) + (offset if 'cross_decoder' in parts else 0)}"
        else:
            group = {"embed_tokens": "tables", "embed_tokens_per_layer": "tables", "lm_head": "LM head"}.get(
                parts[-1], "PLE projection"
            )
        groups.setdefault(group, []).append((path, module, original))
    return groups


def _quantized(module: Any, original: Any) -> bool:
    """Whether the recipe replaced ``original``: another module (a quantized table) or, for a
    linear, another kind of weight (torchao's quantized tensor)."""
    if type(module) is not type(original):
        return True
    return isinstance(module, torch.nn.Linear) and type(module.weight) is not type(original.weight)
