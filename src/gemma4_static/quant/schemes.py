"""Integer quantization schemes as an NPU runs them, and how each maps onto PyTorch's mechanics.

A scheme names its activation and weight integers (``a16w8``: int16 activations, int8 weights):

- activations: the input of every matmul with weights (each projection, the PLE projection, the LM
  head), per tensor, asymmetric (a scale and a zero point), static: the range is fixed by
  calibration with a min/max observer (``torch.ao.quantization.MinMaxObserver``) and applied with
  ``torch.fake_quantize_per_tensor_affine``; int16 is ``[-32768, 32767]``, int8 ``[-128, 127]``.
- weights: symmetric (zero point 0), per output channel (``w8``: ``PerChannelMinMaxObserver`` and
  ``torch.fake_quantize_per_channel_affine``), or blockwise (``w4``: int4 ``[-8, 7]``, one scale per
  :data:`GROUP_SIZE` inputs of a row; a width that is no multiple of it gets one scale per row).
- options: ``+e8`` the token and per-layer embedding tables in int8 (one scale per row), ``+h8`` the
  LM head's weights in int8 (one scale per vocabulary row); without them both stay in float, as
  deployments that keep the head in higher precision do.

Norms, RoPE, softmax, the attention matmuls (scores and values), residual adds and the logit
softcap stay in float32: what a recipe's integer matmuls change, isolated. The recipes these follow:
``a16w8`` Qualcomm's QNN 16a8w (ExecuTorch's Gemma 4 recipe), ``a16w4`` its 16a4w with blockwise
weights and Samsung TICO's int16 activations with uint4 linear weights, ``a8w8`` the XNNPACK static
int8 quantizer (``get_symmetric_quantization_config(is_per_channel=True)``); ``+e8+h8`` the 8-bit
embeddings and LM head of ExecuTorch's and TICO's exports.

Dynamic schemes are ports' recipes (this runtime runs the static ones): ``8da4w`` and ``8da8w``,
ExecuTorch's Gemma 4 export through torchao (``Int8DynamicActivationIntxWeightConfig``):
activations int8 per token, asymmetric, their range taken at run time (no calibration); weights
symmetric int4 in groups of :data:`GROUP_SIZE` inputs or int8 per output channel, each scale chosen
by HQQ (``hqq_scale_only``); every ``nn.Linear`` whose width the group divides, the LM head among
them. ``+emb8`` (ExecuTorch's spelling) puts the token and per-layer tables in int8, one scale per row.

Static schemes of ports' own recipes: ``a16w16t`` and ``a8w8t``, Samsung TICO's PTQ wrappers with a
signed integer spec (its default ``affine(int16)``, and ``affine(int8)``): activations *and* weights
symmetric per tensor (``t``), activations observed at every site of its wrappers (not only the
matmul inputs), ranges fixed by calibration on the suite's prompts.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

GROUP_SIZE = 32  # inputs per int4 block (ExecuTorch's Gemma 4 export defaults to 128, wider than the embedded models)


@dataclass(frozen=True)
class Scheme:
    """One integer profile: activation and weight bits, the int4 group size (``None``: per output
    channel) and the optional int8 tables and LM head (``None``: float)."""

    name: str
    activation_bits: int
    weight_bits: int
    group_size: int | None = None
    table_bits: int | None = None
    head_bits: int | None = None
    dynamic: bool = False  # activations per token, ranged at run time (a port's recipe)
    per_tensor: bool = False  # weights one scale per tensor and activations symmetric (a port's recipe)
    weight_qparams: str = "minmax"  # how a weight scale is chosen: "minmax" or torchao's "hqq_scale_only"


BASES = {
    "a16w8": Scheme("a16w8", activation_bits=16, weight_bits=8),
    "a8w8": Scheme("a8w8", activation_bits=8, weight_bits=8),
    "a16w4": Scheme("a16w4", activation_bits=16, weight_bits=4, group_size=GROUP_SIZE),
}
DYNAMIC_BASES = {
    name: Scheme(name, 8, bits, group, head_bits=bits, dynamic=True, weight_qparams="hqq_scale_only")
    for name, bits, group in (("8da4w", 4, GROUP_SIZE), ("8da8w", 8, None))
}
PORT_STATIC_BASES = {
    name: Scheme(name, bits, bits, table_bits=bits, head_bits=bits, per_tensor=True)
    for name, bits in (("a16w16t", 16), ("a8w8t", 8))
}
OPTIONS = {"e8": "table_bits", "h8": "head_bits"}
DYNAMIC_OPTIONS = {"emb8": "table_bits"}
SCHEMES = (*BASES, *(f"{base}+e8+h8" for base in BASES))  # the ones this runtime runs, gated and tested
PORT_SCHEMES = (*DYNAMIC_BASES, *(f"{base}+emb8" for base in DYNAMIC_BASES))  # ports' dynamic recipes, gated
PORT_STATIC_SCHEMES = tuple(PORT_STATIC_BASES)  # ports' static recipes (calibrated on the suite's prompts), gated


def parse_scheme(text: str) -> Scheme:
    """``"a16w8"``, ``"a16w8+e8"``, ``"a8w8+e8+h8"``...: a base of :data:`BASES` and options of
    :data:`OPTIONS`; or ``"8da4w"``, ``"8da8w+emb8"``: a base of :data:`DYNAMIC_BASES` and options of
    :data:`DYNAMIC_OPTIONS`; or a port's static recipe of :data:`PORT_STATIC_BASES` (no options)."""
    if not isinstance(text, str):
        raise TypeError(f"quant must be a scheme name such as 'a16w8', got {type(text).__name__}")
    base, *options = text.split("+")
    bases, known = (DYNAMIC_BASES, DYNAMIC_OPTIONS) if base in DYNAMIC_BASES else (BASES, OPTIONS)
    if base in PORT_STATIC_BASES:
        bases, known = PORT_STATIC_BASES, {}
    if base not in bases:
        expected = [*BASES, *DYNAMIC_BASES, *PORT_STATIC_BASES]
        raise ValueError(f"quant scheme {text!r} has an unknown base {base!r}; expected one of {expected}")
    unknown = [option for option in options if option not in known]
    if unknown or len(set(options)) != len(options):
        expected = ", ".join(f"+{option}" for option in known) or "none (a port's static recipe takes no options)"
        raise ValueError(f"quant scheme {text!r} has unknown or repeated options; expected some of {expected}")
    return replace(bases[base], name=text, **{known[option]: 8 for option in options})
