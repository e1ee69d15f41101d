"""KV-cache bytes per layout for Gemma 4 E2B, printed as a table.

The E2B geometry model keeps every field the cache depends on as published (35 layers in the 4:1
pattern, 20 of them reusing K/V, one KV head, head dims 256/512, window 512).

Per producing layer the cache holds K and V of ``kv_heads x slots x head_dim`` values; layers that
reuse K/V hold none. ``slots`` is ``max_seq`` for full-attention layers and, for sliding layers,
``max_seq`` in the ``full`` layout or ``sliding_window`` in the ``ring`` layout, so

    bytes = 2 * batch * bytes_per_value * sum over producers of kv_heads * slots * head_dim

The numbers come from the runtime's own cache (allocated on the ``meta`` device, no memory used).

    python benchmarks/kv_memory.py [--max-seq 1024 4096 8192 32768] [--dtype bfloat16]
"""

from __future__ import annotations

import argparse

import torch

from gemma4_static.cpu.cache import StaticKVCache
from gemma4_static.oracle.references.models import e2b_geometry_config
from gemma4_static.spec import read_text_config


def cache_bytes(view, max_seq: int, dtype: torch.dtype, layout: str) -> int:
    with torch.device("meta"):
        cache = StaticKVCache(view, batch_size=1, max_seq=max_seq, dtype=dtype, sliding_cache=layout)
    return sum(buffer.numel() * buffer.element_size() for buffer in (*cache.keys.values(), *cache.values.values()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-seq", type=int, nargs="+", default=[1024, 4096, 8192, 32768])
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16", "float32"))
    args = parser.parse_args()
    view = read_text_config(e2b_geometry_config())
    dtype = getattr(torch, args.dtype)
    producers = [view.layer_types[i] for i, source in enumerate(view.kv_sources) if source == i]
    print(
        f"Gemma 4 E2B, batch 1, {args.dtype}: {producers.count('sliding_attention')} sliding and "
        f"{producers.count('full_attention')} full producing layers, window {view.sliding_window}"
    )
    width = {name: spec.num_kv_heads * spec.head_dim for name, spec in view.type_specs}
    counts = {name: producers.count(name) for name in width}
    terms = " + ".join(f"{counts[name]} x {width[name]} x slots_{name.split('_')[0]}" for name in width)
    print(f"values per position and K or V: {terms}")
    print(f"{'max_seq':>7} {'full layout MiB':>16} {'ring MiB':>9} {'ring/full':>9} {'ideal':>7}")
    for max_seq in args.max_seq:
        full, ring = (cache_bytes(view, max_seq, dtype, layout) / 2**20 for layout in ("full", "ring"))
        ring_slots = {"full_attention": max_seq, "sliding_attention": min(view.sliding_window, max_seq)}
        ideal = sum(counts[n] * width[n] * ring_slots[n] for n in width) / sum(
            counts[n] * width[n] * max_seq for n in width
        )
        print(f"{max_seq:>7} {full:>16.1f} {ring:>9.1f} {ring / full:>9.3f} {ideal:>7.3f}")


if __name__ == "__main__":
    main()
