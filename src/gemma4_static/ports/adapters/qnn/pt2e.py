"""Qualcomm's Gemma 4 in its ``16a8w`` scheme, for :mod:`.port`: each of its two programs
(the prefill program of ``ar_len`` tokens and the decode program of one) exported at the shapes it
runs, annotated by ExecuTorch's ``QnnQuantizer`` with ``QuantDtype.use_16a8w`` and per-channel
linears (its ``llama.py --ptq 16a8w``, without its model-specific annotations), ``prepare_pt2e``,
calibrated by the port's own prefills and decode steps of the suite's calibration rows, then
``convert_pt2e``: the graphs its HTP lowering takes, run eager.

Offline: its SDK setup downloads a libc++ stack and the QNN SDK unless ``QNN_SDK_ROOT`` is set;
set, even empty, it means the caller has taken charge of the SDK
(``executorch.backends.qualcomm.utils.qnn_sdk_setup``). The quantizer needs no SDK library, so the
port sets it empty where it is unset, and nothing is downloaded."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch

from ...limits import SchemeRecipe
from ..executorch.pt2e import linear_input_ranges

RECIPES = (
    SchemeRecipe(
        "a16w8",
        "QnnQuantizer, QuantDtype.use_16a8w, per-channel linears (PT2E, static; llama.py --ptq 16a8w)",
        16,
        "per tensor",
        False,  # uint16, torch.per_tensor_affine
        8,
        "per channel",
        True,
        "every op its quantizer annotates (linears, norms, attention matmuls, adds)",
        activation_clipping=True,  # its MovingAverageMinMaxObserver averages each call's extremes
    ),
)
SCHEMES = tuple(recipe.scheme for recipe in RECIPES)


def quantizer() -> Any:
    """``QnnQuantizer`` in 16a8w with per-channel linears, constructed offline (see the module's note)."""
    os.environ.setdefault("QNN_SDK_ROOT", "")
    from executorch.backends.qualcomm.quantizer.quantizer import QnnQuantizer, QuantDtype

    annotator = QnnQuantizer()
    annotator.set_default_quant_config(
        QuantDtype.use_16a8w, is_qat=False, is_conv_per_channel=True, is_linear_per_channel=True
    )
    return annotator


class StaticPrograms:
    """The port's programs (``{ar_len: module}``) as prepared PT2E graphs, each exported on
    ``example(ar_len)`` (its call's inputs), observing until :meth:`calibrate` converts them."""

    def __init__(self, programs: dict[int, torch.nn.Module], example: Callable[[int], tuple], offset: int) -> None:
        from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e

        self.graphs = {}
        for ar_len, program in programs.items():
            with torch.no_grad():
                exported = torch.export.export(program, example(ar_len))
            self.graphs[ar_len] = prepare_pt2e(exported.module(), quantizer())
        self.offset, self.ranges = offset, {}

    def calibrate(self, run: Callable[[], Any]) -> None:
        """Observe while ``run()`` runs both graphs, keep the prefill graph's linear ranges, convert."""
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e

        run()
        self.ranges = linear_input_ranges(self.graphs[max(self.graphs)], self.offset)
        self.graphs = {ar_len: convert_pt2e(graph) for ar_len, graph in self.graphs.items()}


def prefill_and_decode(port: Any, prompt: Any, steps: int = 2) -> None:
    """A calibration pass of ``port``'s two programs: its prefill of ``prompt`` and ``steps`` greedy
    decode steps after it."""
    logits = port.prefill(prompt).logits
    for _ in range(steps):
        logits = port.decode(logits.argmax(-1, keepdim=True))
