"""ExecuTorch's Gemma 4 in a static scheme of ExecuTorch's PT2E flow, for :mod:`.port`:
its text decoder exported as its export exports it (``torch.export`` with a dynamic ``seq_len`` up
to ``max_seq_len - 1`` and ``input_pos``, the KV cache as mutated buffers), annotated by ExecuTorch's
``XNNPACKQuantizer`` with ``get_symmetric_quantization_config(is_per_channel=True)`` on every
``aten.linear`` (static: int8 per-tensor affine ranges at each linear's input and output, fixed by
its histogram observers; int8 per-channel symmetric weights), ``prepare_pt2e``, calibrated by the port's
own prefills of the suite's calibration prompts, then ``convert_pt2e``: the graph the XNNPACK
lowering takes, run eager. Its buffers are the eager model's (the same tensors), so its cache reads
and resets stay the port's. The exported graph holds ``max_seq - 1`` tokens, one fewer than the
eager model: a runtime assertion of the export refuses a call at position ``max_seq - 1`` (``u0 <=
max_seq - 2``; found by the fuzzer), which the port declares (``reserves_decode_slot``)."""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from typing import Any

import torch

from ...capabilities.calibration import representable_range
from ...limits import SchemeRecipe

RECIPES = (
    SchemeRecipe(
        "a8w8",
        "XNNPACKQuantizer, get_symmetric_quantization_config(is_per_channel=True) on aten.linear (PT2E, static)",
        8,
        "per tensor",
        False,  # torch.per_tensor_affine
        8,
        "per channel",
        True,
        "every linear's input and output (XNNPACK's static quantized linear)",
        activation_clipping=True,  # its activations' HistogramObserver chooses a range that minimizes the error
    ),
)
SCHEMES = tuple(recipe.scheme for recipe in RECIPES)
# its module paths by the suite's site names (those HF's reference quantizes)
SITE_NAMES = (
    (
        re.compile(r"\.(self|cross)_decoder\.layers\.(\d+)\.(?:self_attn|mlp|attention|feed_forward)\.(\w+_proj)$"),
        "layer",
    ),
    (re.compile(r"\.(self|cross)_decoder\.layers\.(\d+)\.per_layer_input_gate$"), "ple_gate"),
    (re.compile(r"\.(self|cross)_decoder\.layers\.(\d+)\.per_layer_projection$"), "ple_projection"),
    (re.compile(r"per_layer_model_projection$"), "PLE projection"),
    (re.compile(r"lm_head$"), "LM head"),
)


class StaticProgram:
    """The PT2E program of ExecuTorch's ``Gemma4ForCausalLM`` with ``max_seq`` cache slots: exported
    and annotated at construction; :meth:`calibrate` runs the observers, then converts."""

    def __init__(self, model: torch.nn.Module, max_seq: int, self_decoder_layers: int) -> None:
        from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import get_symmetric_quantization_config
        from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e

        from ....executorch.xnnpack_quant import xnnpack_quantizer

        seq_len = torch.export.Dim("seq_len", min=1, max=max_seq - 1)
        example = min(8, max_seq - 1)
        math = torch.nn.attention.sdpa_kernel([torch.nn.attention.SDPBackend.MATH])
        with warnings.catch_warnings(), math, torch.no_grad():  # its export's own warnings, not ours to show
            warnings.filterwarnings("ignore", message="_check_is_size will be removed", category=FutureWarning)
            exported = torch.export.export(
                model,
                (torch.zeros(1, example, dtype=torch.long),),
                {"input_pos": torch.arange(example)},
                dynamic_shapes=({1: seq_len}, {0: seq_len}),
            )
        config = get_symmetric_quantization_config(is_per_channel=True)
        quantizer = xnnpack_quantizer().set_operator_type(torch.ops.aten.linear.default, config)
        self.graph = prepare_pt2e(exported.module(), quantizer)
        self.offset = self_decoder_layers  # the cross decoder's layers continue HF's numbering
        self.calibrated = False

    def __call__(self, ids: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
        return self.graph(ids, input_pos)

    def calibrate(self, run: Callable[[], Any]) -> None:
        """Observe while ``run()`` runs the prepared graph (the port's prefills), keep the ranges, convert."""
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e

        run()
        self.ranges = linear_input_ranges(self.graph, self.offset)
        self.graph = convert_pt2e(self.graph)
        self.calibrated = True


def linear_input_ranges(graph: torch.fx.GraphModule, offset: int) -> dict[str, tuple[float, float]]:
    """Each linear's input range in a prepared PT2E ``graph``, as its observer's scale and zero point
    fix it, by the suite's site names (``offset``: the self decoder's layers, where the cross decoder's
    numbering continues)."""
    ranges = {}
    for node in graph.graph.nodes:
        if node.target is not torch.ops.aten.linear.default or node.args[0].op != "call_module":
            continue
        site = _site(next(reversed(node.meta.get("nn_module_stack", {}).values()), ("", None))[0], offset)
        observer = graph.get_submodule(node.args[0].target)
        if site and float(observer.min_val) <= float(observer.max_val):
            scale, zero_point = observer.calculate_qparams()
            ranges[site] = representable_range(float(scale), float(zero_point), observer.quant_min, observer.quant_max)
    return ranges


def _site(path: str, offset: int) -> str | None:
    for pattern, name in SITE_NAMES:
        found = pattern.search(path)
        if found and found.groups():
            decoder, index, *proj = found.groups()
            number = int(index) + (offset if decoder == "cross" else 0)
            return f"layer {number} {proj[0] if proj else name}"
        if found:
            return name
    return None
