"""TICO's runtime graphs (its export adapters) with the inputs of their latest calls, captured as its
runtime calls them: the port's per-layer outputs come from them, and its export cases are them."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from ....export import StageCase
from ...core import NotExposed


class GraphRecorder:
    """The graphs of a TICO ``StaticGemma4Runtime`` (token embedding, PLE projection, vision prefill,
    fusion, LM head, each layer's prefill and decode graph) and the inputs each last ran on."""

    def __init__(self, runtime: Any, text_config: Any) -> None:
        self.runtime, self.text = runtime, text_config
        self.captured: dict[str, tuple[tuple, dict]] = {}

    def graphs(self) -> dict[str, torch.nn.Module]:
        runtime = self.runtime
        graphs = {
            "token_embedding": runtime.token_embedding,
            "mm_fusion": runtime.mm_fusion,
            "lm_head": runtime.lm_head,
        }
        if runtime.ple_projection is not None:
            graphs["ple_projection"] = runtime.ple_projection
        if runtime.vision_prefill is not None:
            graphs["vision_prefill"] = runtime.vision_prefill
        graphs.update({f"prefill layer {index}": layer for index, layer in enumerate(runtime.prefill_layers)})
        graphs.update({f"decode layer {index}": layer for index, layer in enumerate(runtime.decode_layers)})
        return graphs

    @contextlib.contextmanager
    def recording(self) -> Iterator[dict[str, Any]]:
        """Each graph's inputs (kept in ``captured``) and outputs (yielded by name) while the block runs."""
        outputs: dict[str, Any] = {}

        def hook(name: str) -> Any:
            def record(module: Any, args: tuple, kwargs: dict, output: Any) -> None:
                self.captured[name] = (args, kwargs)
                outputs[name] = output

            return record

        handles = [module.register_forward_hook(hook(name), with_kwargs=True) for name, module in self.graphs().items()]
        try:
            yield outputs
        finally:
            for handle in handles:
                handle.remove()

    def export_cases(self) -> list[StageCase]:
        """Its export graphs with the inputs of their latest calls: token embedding, PLE projection,
        vision prefill, fusion, LM head, and one prefill and one decode graph per layer type and K/V
        role (producing or KV-shared)."""
        if not any(name.startswith("decode") for name in self.captured):
            raise NotExposed("TICO's graphs are captured by a prefill and a decode step")
        first_shared = self.text.num_hidden_layers - self.text.num_kv_shared_layers
        representative: dict[tuple[str, bool], int] = {}
        for index, layer_type in enumerate(self.text.layer_types):
            representative.setdefault((layer_type, index >= first_shared), index)
        chosen = {name for name in self.captured if "layer" not in name}
        chosen |= {f"{mode} layer {index}" for index in representative.values() for mode in ("prefill", "decode")}
        graphs = self.graphs()
        return [
            StageCase(name.replace(" ", "_"), graphs[name], *self.captured[name])
            for name in graphs
            if name in chosen and name in self.captured
        ]
