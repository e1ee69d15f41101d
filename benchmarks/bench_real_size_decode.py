"""Per-token decode at Gemma 4 E2B's real widths against the bandwidth limit, side by side in one run:
HF's own ``DynamicCache`` step, this runtime's PyTorch backend, and its ExecuTorch one-program
bundle in float and with its projections and LM head in ``8da4w`` (int8 dynamic activations, int4
weights in groups of ``--group``, by default 128 as ExecuTorch's Gemma 4 export quantizes them, by
its own ``quantize_model_``;
a speed figure, not a profile verify judges).

The checkpoint (``write_real_size_checkpoint.py``; written first when the folder holds none) is
loaded as verify loads it: memory-mapped, converted to ``--dtype`` but for the per-layer-embedding
table (kept in bfloat16, read row-wise). Each side prefills the same prompt, then decode steps alternate between HF, the
PyTorch backend and one ExecuTorch side (its program lowered first, then freed before the next: two
real-size programs do not fit beside the model), so the three see the same machine load; medians
are printed with the process's resident memory after the side ran. A side's limit is the bytes of
weights one step must read (every weight once, the embedding tables one row: the token's and its
per-layer row; the LM head's matrix whole) divided by the machine's read bandwidth in the same
phase: a sum over a 2 GiB tensor timed among the steps, its fastest (the tightest limit; this
machine's figure moves between runs, so a side is only compared with its own phase's); ``/limit
med`` divides by the limit at the probe's median instead, the same statistic as the steps'.

    python benchmarks/bench_real_size_decode.py DIR [--layers 10] [--max-seq 1024] [--prompt 256] [--steps 8]
        [--group 128] [--sides executorch executorch-8da4w]  (default: the 8da4w side)
"""

from __future__ import annotations

import argparse
import copy
import gc
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
from timing import machine
from torch import nn
from write_real_size_checkpoint import write

from gemma4_static.executorch.program_cache import forget_programs
from gemma4_static.oracle.references.checkpoints import load_checkpoint
from gemma4_static.oracle.references.models import e2b_real_text_config
from gemma4_static.oracle.references.samples import text_prompt
from gemma4_static.oracle.references.streamed import converted
from gemma4_static.runtime import StaticGemma4Runtime

GROUP = 128  # int4 weights per scale: ExecuTorch's Gemma 4 export's default (export_gemma4.py --group_size)
SUM_BYTES = 2 << 30  # the bandwidth probe: far past any cache
SIDES = ("executorch", "executorch-8da4w")  # the ExecuTorch sides, each in its own phase


def seconds(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def read_probe() -> Callable[[], object]:
    """One read of a 2 GiB float32 tensor (its sum): the bandwidth probe timed beside the steps."""
    probe = torch.ones(SUM_BYTES // 4)
    return probe.sum


def int4_bytes(weight: torch.Tensor, group: int) -> int:
    """Bytes of 2-D ``weight`` in int4: 4 bits a weight and a bfloat16 scale per ``group`` weights
    (XNNPACK's qb4w); ``group`` 0: a float32 scale per output row (per channel: its qc4w)."""
    scales = weight.shape[0] * 4 if group == 0 else weight.numel() // group * 2
    return weight.numel() // 2 + scales


def bytes_per_step(model: nn.Module, group: int | None = None) -> int:
    """Bytes of weights one decode step reads: every parameter once (by storage: the LM head tied to
    the token table is one matrix, read whole), an embedding table's one row unless the LM head reads
    it whole; with ``group``: every 2-D weight but the tables in int4 in groups of ``group`` (0: per
    channel)."""
    head = model.get_output_embeddings().weight
    rows = {
        module.weight.data_ptr(): module.weight[0]
        for module in model.modules()
        if isinstance(module, nn.Embedding) and module.weight.data_ptr() != head.data_ptr()
    }
    total, seen = 0, set()
    for parameter in model.parameters():
        if parameter.data_ptr() in seen:
            continue
        seen.add(parameter.data_ptr())
        if parameter.data_ptr() in rows:
            total += rows[parameter.data_ptr()].nbytes
        elif group is not None and parameter.dim() == 2:
            total += int4_bytes(parameter, group)
        else:
            total += parameter.nbytes
    return total


class QuantizedHead(nn.Module):
    """The LM head's matmul as its own ``nn.Linear`` (a copy of the tied matrix) for ``quantize_model_``;
    the weight the stage passes in is not read."""

    def __init__(self, weight: torch.Tensor) -> None:
        super().__init__()
        self.linear = nn.Linear(weight.shape[1], weight.shape[0], bias=False, dtype=weight.dtype)
        self.linear.weight = nn.Parameter(weight.detach().clone(), requires_grad=False)

    def forward(self, normed: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return self.linear(normed)


def quantized_8da4w(runtime: StaticGemma4Runtime, *, group: int) -> None:
    """``runtime``'s projections (the decoder layers' and the per-layer inputs' projection of the
    embeddings) and LM head replaced by 8da4w copies in groups of ``group`` (the HF model's stay float)."""
    from executorch.extension.llm.export.quantize import quantize_model_

    for layer in runtime.modules.layers:
        for name, child in list(layer.named_children()):
            if isinstance(child, nn.Linear):
                setattr(layer, name, copy.deepcopy(child))
    runtime.modules.lm_head.matmul = QuantizedHead(runtime.modules.lm_head.weight)
    per_layer = runtime.modules.per_layer_inputs
    projection = nn.Linear(*reversed(per_layer.projection.shape), bias=False, dtype=per_layer.projection.dtype)
    projection.weight = nn.Parameter(per_layer.projection.detach().clone(), requires_grad=False)
    targets = nn.ModuleList([*runtime.modules.layers, runtime.modules.lm_head, projection])
    quantize_model_(targets, qlinear_config="8da4w", qlinear_group_size=group, skip_incompatible_shapes=True)
    per_layer.projection = projection.weight  # read by F.linear: the quantized weight's own linear


def resident_gb() -> float:
    """This process's resident memory now, in GB."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS")) / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--layers", type=int, default=10, choices=(10, 35), help="written when the folder is empty")
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    parser.add_argument("--max-seq", type=int, default=1024)
    parser.add_argument("--prompt", type=int, default=256)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument(
        "--group",
        type=int,
        default=GROUP,
        help="int4 weights per scale in the 8da4w sides (0: one scale per output channel)",
    )
    parser.add_argument("--sides", nargs="*", default=["executorch-8da4w"], choices=SIDES)
    args = parser.parse_args()
    os.environ.setdefault("GEMMA4_STATIC_PROGRAM_CACHE", "off")  # no multi-GB program in the user's cache
    torch.set_grad_enabled(False)
    if not (args.folder / "config.json").is_file():
        write(args.folder, e2b_real_text_config(args.layers), seed=0)
    model = converted(load_checkpoint(args.folder), getattr(torch, args.dtype))  # as verify loads it
    config = model.config
    probe = read_probe()
    grouping = "per channel" if args.group == 0 else f"in groups of {args.group}"
    print(
        f"{args.folder}: {config.num_hidden_layers} layers of E2B's real widths, {args.dtype}; max_seq "
        f"{args.max_seq}, prompt {args.prompt}, batch 1; 8da4w {grouping}; {machine()}"
    )
    prompt = text_prompt(config, [args.prompt])
    token = torch.full((1, 1), 7)
    hf_cache = model(**prompt.hf_kwargs(), use_cache=True, logits_to_keep=1).cache
    pytorch = StaticGemma4Runtime(model, max_seq=args.max_seq)
    pytorch.prefill(prompt.input_ids, prompt.attention_mask)
    packed = StaticGemma4Runtime(model, max_seq=args.max_seq, backend="torch-packed")
    packed.prefill(prompt.input_ids, prompt.attention_mask)
    float_bytes, quantized_bytes = bytes_per_step(model), bytes_per_step(model, group=args.group)
    header = (
        "side",
        "ms/token",
        "GB read",
        "GB/s",
        "limit ms",
        "/limit",
        "/limit med",
        "/HF",
        "/PyTorch",
        "lowered s",
        "RSS GB",
    )
    print(" ".join(f"{name:>16}" if i == 0 else f"{name:>10}" for i, name in enumerate(header)))
    for side in [None, *args.sides]:
        sides: dict[str, Callable[[], object]] = {
            "HF": lambda: model(input_ids=token, cache=hf_cache, use_cache=True),
            "PyTorch": lambda: pytorch.decode_one(token),
            "PyTorch packed": lambda: packed.decode_one(token),
        }
        lowered = None
        if side is not None:
            runtime = StaticGemma4Runtime(model, max_seq=args.max_seq, backend="executorch")
            if side == "executorch-8da4w":
                quantized_8da4w(runtime, group=args.group)
            lowered = seconds(lambda runtime=runtime: runtime.prefill(prompt.input_ids, prompt.attention_mask))
            sides[side] = lambda runtime=runtime: runtime.decode_one(token)
        sides["read probe"] = probe
        for call in sides.values():
            call()
        times: dict[str, list[float]] = {name: [] for name in sides}
        for _ in range(args.steps):
            for name, call in sides.items():
                times[name].append(seconds(call))
        ms = {name: statistics.median(values) * 1e3 for name, values in times.items()}
        bandwidth = SUM_BYTES / min(times["read probe"])  # the fastest read of the phase: the tightest limit
        typical = SUM_BYTES / statistics.median(times["read probe"])  # the median read, as the steps' median
        for name in ("HF", "PyTorch", "PyTorch packed") if side is None else [side]:
            read = quantized_bytes if name.endswith("8da4w") else float_bytes
            limit = read / bandwidth * 1e3
            cells = (
                f"{ms[name]:.1f}",
                f"{read / 1e9:.2f}",
                f"{bandwidth / 1e9:.1f}",
                f"{limit:.1f}",
                f"{ms[name] / limit:.2f}",
                f"{ms[name] / (read / typical * 1e3):.2f}",
                f"{ms[name] / ms['HF']:.2f}",
                f"{ms[name] / ms['PyTorch']:.2f}",
                "" if lowered is None else f"{lowered:.0f}",
                f"{resident_gb():.1f}",
            )
            print(f"{name:>16} " + " ".join(f"{cell:>10}" for cell in cells), flush=True)
        sides.clear()
        runtime = None
        forget_programs()  # the process's program cache holds each program and what it was lowered from
        gc.collect()


if __name__ == "__main__":
    main()
