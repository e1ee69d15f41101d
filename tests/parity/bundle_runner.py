"""A bundle runner that knows only the manifest: greedy generation through a cache-in-program
bundle with ExecuTorch's runtime and plain torch, following the manifest's calling convention
(what a C++ runner would do). No gemma4_static module is imported here.

    python bundle_runner.py FOLDER REQUEST.json  ->  prints {"tokens": [[...], ...], "project_imported": false}

REQUEST: {"input_ids": [[...], ...], "lengths": [...], "max_new_tokens": N} (rows right-padded).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from executorch.runtime import Runtime


def step_inputs(manifest: dict, ids: torch.Tensor, positions: torch.Tensor, keep: torch.Tensor) -> list:
    """The inputs of one call for ``ids``/``positions``/``keep`` ``(B, S)``, by the convention."""
    before, written = positions[:, 0], positions[:, 0] + keep.sum(dim=1)
    masks, slots = [], []
    for layer_type in manifest["layer_types"]:
        capacity, window = layer_type["capacity"], layer_type["window"]
        if layer_type["ring"]:
            ring = torch.arange(capacity)[None, :]
            held = ring + capacity * torch.div(before[:, None] - 1 - ring, capacity, rounding_mode="floor")
            held = torch.where((held >= 0) & (held < before[:, None]), held, -1)
            keys = torch.cat((held, torch.where(keep, positions, -1)), dim=1)
            last = torch.where(keep, positions, -1).max(dim=1, keepdim=True).values
            slot = torch.where(keep & (positions > last - capacity), positions % capacity, capacity)
        else:
            index = torch.arange(capacity)[None, :]
            keys = torch.where(index < written[:, None], index, -1)
            slot = torch.where(keep, positions, capacity)
        query, key = positions[:, :, None], keys[:, None, :]
        allowed = (key >= 0) & (key <= query)
        if window is not None:
            allowed &= query - key < window
        masks.append(torch.where(allowed, 0.0, manifest["mask_fill"])[:, None].contiguous())
        slots.append(slot.contiguous())
    last_index = (keep.sum(dim=1) - 1).clamp(min=0)
    dtype = getattr(torch, manifest["dtype"])
    embeddings = torch.zeros(*ids.shape, manifest["hidden_size"], dtype=dtype)  # text: no soft tokens
    embedded = torch.zeros(*ids.shape, 1, dtype=dtype)
    return [ids.contiguous(), embeddings, embedded, positions.contiguous(), last_index, *masks, *slots]


def generate(folder: Path, request: dict) -> list[list[int]]:
    manifest = json.loads((folder / "manifest.json").read_text())
    program = Runtime.get().load_program((folder / manifest["file"]).read_bytes())
    prefill, decode = program.load_method("prefill"), program.load_method("decode")
    chunk = manifest["methods"]["prefill"]["tokens"]
    lengths = torch.tensor(request["lengths"])
    batch = len(lengths)
    ids = torch.full((batch, manifest["max_seq"]), manifest["pad_token_id"])
    for row, (tokens, length) in enumerate(zip(request["input_ids"], request["lengths"], strict=True)):
        ids[row, :length] = torch.tensor(tokens[:length])
    valid = torch.arange(manifest["max_seq"])[None, :] < lengths[:, None]
    logits = torch.zeros(batch, manifest["vocab_size"])
    for start in range(0, int(lengths.max()), chunk):
        positions = torch.arange(start, start + chunk).expand(batch, -1)
        span = slice(start, start + chunk)
        out = prefill.execute(step_inputs(manifest, ids[:, span], positions, valid[:, span]))[0]
        ends_here = (lengths > start) & (lengths <= start + chunk)
        logits[ends_here] = out[ends_here]
    generated = []
    for step in range(request["max_new_tokens"]):
        token = logits.argmax(dim=-1)
        generated.append(token)
        if step + 1 < request["max_new_tokens"]:
            positions = (lengths + step)[:, None]
            keep = torch.ones_like(positions, dtype=torch.bool)
            logits = decode.execute(step_inputs(manifest, token[:, None], positions, keep))[0]
    return torch.stack(generated, dim=1).tolist()


if __name__ == "__main__":
    tokens = generate(Path(sys.argv[1]), json.loads(Path(sys.argv[2]).read_text()))
    imported = any(name.startswith("gemma4_static") for name in sys.modules)
    print(json.dumps({"tokens": tokens, "project_imported": imported}))
