"""XNNPACK's 8da4w products at E2B's projection widths against the read bandwidth, side by side in one
run: what the one program's ``8da4w`` decode step could reach if everything but its products were free.

One ExecuTorch program holds the projections of ``--layers`` decoder layers of E2B's widths (q, k,
v, o, gate, up, down: 1536 wide, 2048 for the queries, 256 for K and V, 6144 for the MLP), applied to
one token, int4 weights quantized by ExecuTorch's own ``quantize_model_`` as the real-size decode
benchmark does. Sides, timed in turns with the read probe (a sum over a 1 GiB tensor; medians of
each):

- each group size asked (``--groups``, default 32 and 128: ExecuTorch's Gemma 4 export defaults to 128);
- ``fused``: the same bytes in fewer products (q, k and v as one, gate and up as one; groups of 32),
  what a bundle that concatenated those weights would run.

Each line: ms a call, GB of weights read (int4 and a bfloat16 scale per group), GB/s, and the time over
the bandwidth limit of those bytes.

    python benchmarks/bench_int4_products.py [--layers 20] [--groups 32 128] [--repeats 30]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
from timing import machine, medians_side_by_side
from torch import nn

HIDDEN, QUERIES, KV, MLP = 1536, 2048, 256, 6144
SEPARATE = {"q": (HIDDEN, QUERIES), "k": (HIDDEN, KV), "v": (HIDDEN, KV), "o": (QUERIES, HIDDEN),
            "gate": (HIDDEN, MLP), "up": (HIDDEN, MLP), "down": (MLP, HIDDEN)}  # fmt: skip
FUSED = {"qkv": (HIDDEN, QUERIES + 2 * KV), "o": (QUERIES, HIDDEN), "gate_up": (HIDDEN, 2 * MLP), "down": (MLP, HIDDEN)}
PROBE_BYTES = 1 << 30


class Projections(nn.Module):
    """``layers`` sets of linears of ``shapes`` (name: (in, out)); each applied to a token of its width."""

    def __init__(self, shapes: dict[str, tuple[int, int]], layers: int) -> None:
        super().__init__()
        self.shapes = shapes
        self.layers = nn.ModuleList(
            nn.ModuleDict({name: nn.Linear(inp, out, bias=False) for name, (inp, out) in shapes.items()})
            for _ in range(layers)
        )

    def forward(self, hidden: torch.Tensor, queries: torch.Tensor, mlp: torch.Tensor) -> list[torch.Tensor]:
        by_width = {HIDDEN: hidden, QUERIES: queries, MLP: mlp}
        return [layer[name](by_width[inp]) for layer in self.layers for name, (inp, _) in self.shapes.items()]


def lowered(shapes: dict[str, tuple[int, int]], layers: int, group: int) -> tuple[Callable[[], object], float]:
    """The program's call on one token, and the bytes of weights it reads."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from executorch.extension.llm.export.quantize import quantize_model_
    from executorch.runtime import Runtime

    module = Projections(shapes, layers).eval()
    quantize_model_(module, qlinear_config="8da4w", qlinear_group_size=group)
    inputs = tuple(torch.randn(1, 1, width) for width in (HIDDEN, QUERIES, MLP))
    program = to_edge_transform_and_lower(torch.export.export(module, inputs), partitioner=[XnnpackPartitioner()])
    loaded = Runtime.get().load_program(program.to_executorch().buffer)  # held: its methods live in it
    method = loaded.load_method("forward")
    weights = layers * sum(inp * out for inp, out in shapes.values())
    return (lambda: (loaded, method.execute(list(inputs)))), weights * (0.5 + 2 / group)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=20, help="enough that the weights outgrow the caches")
    parser.add_argument("--groups", type=int, nargs="*", default=[32, 128])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    torch.set_grad_enabled(False)
    sides = {f"groups of {group}": lowered(SEPARATE, args.layers, group) for group in args.groups}
    sides["fused, groups of 32"] = lowered(FUSED, args.layers, 32)
    tensor = torch.ones(PROBE_BYTES // 4)
    calls = (*(call for call, _ in sides.values()), tensor.sum)
    *seconds, probe = medians_side_by_side(calls, args.repeats)
    bandwidth = PROBE_BYTES / probe
    print(f"{args.layers} layers of E2B's projections, one token; {machine()}; read probe {bandwidth / 1e9:.1f} GB/s")
    print(f"{'side':>22} {'ms':>8} {'GB read':>8} {'GB/s':>8} {'/limit':>8}")
    for (name, (_, read)), took in zip(sides.items(), seconds, strict=True):
        limit = read / bandwidth
        print(f"{name:>22} {took * 1e3:8.2f} {read / 1e9:8.3f} {read / took / 1e9:8.1f} {took / limit:8.2f}")


if __name__ == "__main__":
    main()
