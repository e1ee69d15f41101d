"""Write a seeded checkpoint of Gemma 4 E2B's real text widths to a folder: E2B's text config exactly
(hidden 1536, vocabulary 262,144, per-layer embeddings 262,144 x 35 x 256: 4.63 billion parameters,
9.3 GB in bfloat16, as E2B ships), or its first layers only (``--layers 10``: the 4:1 pattern twice,
the last five reusing K/V; what fits a smaller runner).

The weights are drawn tensor by tensor and streamed into one ``model.safetensors`` (the format
written by hand: a JSON header, then each tensor's bytes), so the writer holds one chunk of rows at
a time, never the model: about two minutes and well under 10 GB for the full size. They are made to
look trained cheaply, by the rules of the embedded models (``oracle/references/trained.py``): norm
weights ``U(0.6, 1.4)``, q/k norms ``head_dim ** -0.25 x U(0.8, 1.2)``, ``layer_scalar`` ``U(0.7,
1.3)``, every other tensor ``N(0, 0.02)`` (HF's initializer range); no forward calibrates the final
norm (that would cost a real-size forward).

    python benchmarks/write_real_size_checkpoint.py DIR [--layers 35] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import re
import struct
import time
import zlib
from pathlib import Path

import torch
from transformers import Gemma4ForCausalLM, Gemma4TextConfig

from gemma4_static.oracle.references.models import e2b_real_text_config
from gemma4_static.spec import read_text_config

CHUNK = 1 << 25  # values drawn at a time (64 MB in float32)
STD = 0.02  # HF's initializer range


def rule(name: str, config: Gemma4TextConfig) -> tuple[str, float, float]:
    """How tensor ``name`` is drawn: ``("normal", 0, std)`` or ``("uniform", low, high)``."""
    if name.endswith(("q_norm.weight", "k_norm.weight")):
        layer = int(re.search(r"layers\.(\d+)\.", name).group(1))
        scale = read_text_config(config).spec(config.layer_types[layer]).head_dim ** -0.25
        return "uniform", 0.8 * scale, 1.2 * scale
    if name.endswith("layer_scalar"):
        return "uniform", 0.7, 1.3
    if re.search(r"norm(_\d)?\.weight$", name):
        return "uniform", 0.6, 1.4
    return "normal", 0.0, STD


def shapes(config: Gemma4TextConfig) -> dict[str, tuple[torch.Size, torch.dtype]]:
    """Every tensor the checkpoint holds (the tied LM head once, as ``save_pretrained`` writes it)."""
    with torch.device("meta"):
        model = Gemma4ForCausalLM(config)
    tied = set(model._tied_weights_keys or {}) if config.tie_word_embeddings else set()
    return {name: (tensor.shape, tensor.dtype) for name, tensor in model.state_dict().items() if name not in tied}


def write(folder: Path, config: Gemma4TextConfig, seed: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    config.save_pretrained(folder)
    tensors = shapes(config)
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, (shape, _) in tensors.items():
        size = shape.numel() * 2  # bfloat16
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)
    path = folder / "model.safetensors"
    with path.open("wb") as file:
        file.write(struct.pack("<Q", len(encoded)) + encoded)
        for name, (shape, _) in tensors.items():
            kind, low, high = rule(name, config)
            generator = torch.Generator().manual_seed(seed * 1_000_003 + zlib.crc32(name.encode()))
            remaining = shape.numel()
            while remaining:
                count = min(CHUNK, remaining)
                if kind == "normal":
                    values = torch.randn(count, generator=generator) * high
                else:
                    values = torch.rand(count, generator=generator) * (high - low) + low
                file.write(values.to(torch.bfloat16).view(torch.int16).numpy().tobytes())
                remaining -= count
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--layers", type=int, default=35, choices=(10, 35), help="E2B's 35, or its first 10")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.perf_counter()
    config = e2b_real_text_config(args.layers)
    path = write(args.folder, config, args.seed)
    count = sum(shape.numel() for shape, _ in shapes(config).values())
    print(
        f"{path}: {count / 1e9:.2f} billion parameters, {path.stat().st_size / 1e9:.2f} GB in bfloat16, "
        f"{config.num_hidden_layers} layers, in {time.perf_counter() - started:.0f} s"
    )


if __name__ == "__main__":
    main()
