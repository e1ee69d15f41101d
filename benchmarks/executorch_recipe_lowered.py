"""ExecuTorch's Gemma 4 in its own integer recipe, lowered to XNNPACK and run by ExecuTorch's runtime,
beside the same port eager (what ``verify --port executorch-gemma4 --quant SCHEME`` judges) and HF
in float64, on one prompt of the tiny model.

    python benchmarks/executorch_recipe_lowered.py [--scheme 8da4w 8da8w] [--length 9]

The model is exported as its export does (``torch.export`` of the quantized eager model, a static
prompt length here), lowered with XNNPACK's dynamically quantized and float partitioners, run once
from position 0; printed: the last token's logits against the eager port (max abs, SQNR) and each
against float64 (SQNR, argmax), with the lowering time. ``+emb8`` lowers but does not load in the
Python runtime of the ``executorch`` wheel (no ``quantized_decomposed::embedding_byte`` kernel).
"""

from __future__ import annotations

import argparse
import copy
import time

import torch

from gemma4_static.oracle.numerics.metrics import measure
from gemma4_static.oracle.references.models import build_default_model
from gemma4_static.ports import PortSetup
from gemma4_static.ports.adapters.executorch.port import ExecuTorchGemma4Port


@torch.no_grad()
def lowered_logits(model: torch.nn.Module, ids: torch.Tensor) -> tuple[torch.Tensor, float]:
    """The last token's logits of ``model`` exported, lowered to XNNPACK and run; the lowering's seconds."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import (
        XnnpackDynamicallyQuantizedPartitioner,
        XnnpackPartitioner,
    )
    from executorch.exir import to_edge_transform_and_lower
    from executorch.runtime import Runtime

    positions = torch.arange(ids.shape[1])
    started = time.perf_counter()
    exported = torch.export.export(model, (ids,), kwargs={"input_pos": positions}, strict=False)
    partitioners = [XnnpackDynamicallyQuantizedPartitioner(), XnnpackPartitioner()]
    program = to_edge_transform_and_lower(exported, partitioner=partitioners).to_executorch()
    seconds = time.perf_counter() - started
    method = Runtime.get().load_program(program.buffer).load_method("forward")
    return method.execute([ids, positions])[0][:, -1], seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scheme", nargs="+", default=["8da4w", "8da8w"])
    parser.add_argument("--length", type=int, default=9)
    args = parser.parse_args()
    model = build_default_model("tiny")
    ids = torch.arange(3, 3 + args.length)[None]
    with torch.no_grad():
        reference = copy.deepcopy(model).double()(input_ids=ids, attention_mask=torch.ones_like(ids)).logits[:, -1]
    columns = ("scheme", "lowered vs eager: max abs, SQNR dB", "vs float64 SQNR dB: eager, lowered")
    columns += ("argmax: float64, eager, lowered", "lowering s")
    print("| " + " | ".join(columns) + " |")
    print("|" + " --- |" * len(columns))
    for scheme in args.scheme:
        port = ExecuTorchGemma4Port(model, PortSetup(args.length + 7, quant=scheme))
        with torch.no_grad():
            eager = port.model(ids, torch.arange(args.length))[:, -1].clone()
        port._reset()  # the exported program starts from an empty cache
        lowered, seconds = lowered_logits(port.model, ids)
        gap = measure(lowered, eager)
        print(
            f"| {scheme} | {gap.max_abs:.3g}, {gap.sqnr_db:.1f} | {measure(eager, reference).sqnr_db:.1f}, "
            f"{measure(lowered, reference).sqnr_db:.1f} | {int(reference.argmax())}, {int(eager.argmax())}, "
            f"{int(lowered.argmax())} | {seconds:.0f} |"
        )


if __name__ == "__main__":
    main()
