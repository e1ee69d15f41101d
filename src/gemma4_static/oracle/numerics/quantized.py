"""HF's own modules quantized in an integer scheme, the figure beside the port's: the scheme's
arithmetic from torchao (:mod:`.reference_quant`), not from :mod:`gemma4_static.quant` (so a bug
in this project's fake quantization moves only the runtime's side), its activation ranges
observed in HF's own forward on the same calibration prompts (:func:`calibrated_hf`); a dynamic
scheme (a port's recipe) through torchao's ``quantize_`` with the config that recipe names
(:func:`dynamic_hf`)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from ...quant.schemes import Scheme
from ...spec import text_module
from ..references.samples import Prompt
from .reference_quant import ReferenceActivation, reference_weight, torchao_quantization

CALIBRATION_SEEDS = (11, 12, 13, 14)  # sample prompts of the session's shape, other content than the one checked

ATTENTION = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP = ("gate_proj", "up_proj", "down_proj")
PER_LAYER = ("per_layer_input_gate", "per_layer_projection")
TABLES = {"embed_tokens": "token embedding table", "embed_tokens_per_layer": "PLE table"}
RUNTIME_KINDS = {"per_layer_input_gate": "ple_gate", "per_layer_projection": "ple_projection"}


class ReferenceSite:
    """The weight of HF's ``module`` (an ``nn.Linear`` or a table) in ``weight_bits`` and, with
    ``activation_bits``, its input: observed while calibrating, then quantized (:meth:`settle`).
    ``name`` is the runtime's name of the same site (``"layer 3 q_proj"``)."""

    def __init__(
        self,
        name: str,
        module: nn.Module,
        weight_bits: int,
        group_size: int | None = None,
        activation_bits: int | None = None,
        per_tensor: bool = False,
    ) -> None:
        self.name, self.module, self.weight_bits, self.group_size = name, module, weight_bits, group_size
        self.per_tensor = per_tensor  # one weight scale for the tensor, symmetric activations
        self.activation = None if activation_bits is None else ReferenceActivation(activation_bits, per_tensor)
        self.quantizing = False
        self.rows: tuple[torch.Tensor, torch.Tensor] | None = None  # (batch, position) indices observed, else all
        self._hook = None if self.activation is None else module.register_forward_pre_hook(self._on_input)

    def _on_input(self, module: nn.Module, args: tuple) -> tuple | None:
        if not self.quantizing:
            self.activation.observe(args[0] if self.rows is None else args[0][self.rows])
            return None
        return (self.activation(args[0]), *args[1:])

    def settle(self) -> None:
        """Quantize the weight and, from now on, the input; a site calibration never reached (a
        projection HF holds but never calls: those of layers that reuse K/V) stays float."""
        if self.activation is not None and not self.activation.observed:
            self._hook.remove()
            return
        weight = self.module.weight
        quantized = reference_weight(weight, self.weight_bits, self.group_size, self.per_tensor)
        self.module.weight = nn.Parameter(quantized, False)
        self.quantizing = True


@torch.no_grad()
def calibrated_hf(model: Any, scheme: Scheme, prompts: list[Prompt]) -> tuple[Any, dict[str, ReferenceSite]]:
    """A copy of HF ``model`` quantized where the runtime quantizes (decoder and vision encoder
    projections, the PLE projection, tables and LM head as ``scheme`` says), calibrated over HF's own
    forward on ``prompts``, and its sites by the runtime's site names (those calibration reached).
    The calibration passes are HF's forward itself, never a recorded question: under a recording they
    would be answered from it (the observers seeing no row) and would digest the copy's weights
    before quantization made them its own (its answers then keyed as the float model's)."""
    quantized = copy.deepcopy(model)
    sites = list(_hf_sites(quantized, scheme))
    head = [site for site in sites if site.name == "LM head"]
    for prompt in prompts:
        for site in head:  # the runtime's head runs on each row's last valid token: its range is theirs
            site.rows = (torch.arange(prompt.input_ids.shape[0]), prompt.last_index)
        with torch.no_grad():
            quantized(**prompt.hf_kwargs())
    for site in sites:
        site.settle()
    return quantized, {site.name: site for site in sites if site.quantizing}


def _hf_sites(model: Any, scheme: Scheme) -> Iterator[ReferenceSite]:
    act, bits, group_size, tensor = scheme.activation_bits, scheme.weight_bits, scheme.group_size, scheme.per_tensor
    text = text_module(model)
    for table, name in TABLES.items():
        if scheme.table_bits is not None and getattr(text, table, None) is not None:
            yield ReferenceSite(name, getattr(text, table), scheme.table_bits, per_tensor=tensor)
    if getattr(text, "per_layer_model_projection", None) is not None:
        yield ReferenceSite("PLE projection", text.per_layer_model_projection, bits, group_size, act, tensor)
    vision = getattr(model.model, "vision_tower", None)  # text_module read model.model already
    for index, layer in enumerate([] if vision is None else vision.encoder.layers):
        for kind in (*ATTENTION, *MLP):
            clipped = getattr(layer.self_attn if kind in ATTENTION else layer.mlp, kind)
            yield ReferenceSite(f"vision layer {index} {kind}", clipped.linear, bits, group_size, act, tensor)
    for index, layer in enumerate(text.layers):
        for kind in (*ATTENTION, *MLP, *PER_LAYER):
            parent = layer.self_attn if kind in ATTENTION else layer.mlp if kind in MLP else layer
            if isinstance(getattr(parent, kind, None), nn.Linear):
                name = f"layer {index} {RUNTIME_KINDS.get(kind, kind)}"
                yield ReferenceSite(name, getattr(parent, kind), bits, group_size, act, tensor)
    if scheme.head_bits is not None:
        yield ReferenceSite("LM head", model.lm_head, scheme.head_bits, None, act, tensor)


@torch.no_grad()
def dynamic_hf(model: Any, scheme: Scheme) -> Any:
    """A copy of HF ``model`` in dynamic ``scheme`` through torchao's ``quantize_``, the recipe
    ExecuTorch's export applies, on HF's modules: with ``+emb8`` its text tables first
    (``IntxWeightOnlyConfig``, int8, one scale per row), then every ``nn.Linear`` of its text model
    and its LM head whose input width the group divides (``Int8DynamicActivationIntxWeightConfig``:
    int8 activations per token, ranged at run time; the scheme's weight bits and group), each scale
    chosen as the scheme says. The vision tower stays float: the ports judged this way are text only."""
    torchao = torchao_quantization()
    quantized = copy.deepcopy(model)
    text = text_module(quantized)
    chosen = {id(module) for module in (*text.modules(), quantized.lm_head)}
    if scheme.table_bits is not None:  # held dequantized: HF also reads rows of the table itself (the pad row)
        config = torchao.IntxWeightOnlyConfig(
            weight_dtype=getattr(torch, f"int{scheme.table_bits}"),
            granularity=torchao.PerAxis(0),
            intx_choose_qparams_algorithm=scheme.weight_qparams,
        )
        for table in TABLES:
            module = getattr(text, table, None)
            if module is not None:
                torchao.quantize_(module, config, filter_fn=lambda module, name: isinstance(module, nn.Embedding))
                module.weight = nn.Parameter(module.weight.dequantize(), False)
    group = torchao.PerAxis(0) if scheme.group_size is None else torchao.PerGroup(scheme.group_size)
    linears = torchao.Int8DynamicActivationIntxWeightConfig(
        weight_dtype=getattr(torch, f"int{scheme.weight_bits}"),
        weight_granularity=group,
        intx_choose_qparams_algorithm=scheme.weight_qparams,
    )

    def takes(module: nn.Module, name: str) -> bool:
        width = getattr(module, "in_features", 0)
        fits = scheme.group_size is None or width % scheme.group_size == 0
        return isinstance(module, nn.Linear) and id(module) in chosen and fits

    torchao.quantize_(quantized, linears, filter_fn=takes)
    return quantized
