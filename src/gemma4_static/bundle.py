"""A deployable text bundle: one ExecuTorch program whose KV cache lives inside it, with a
``prefill`` method (a chunk of ``C`` tokens) and a ``decode`` method (one token) sharing the cache
buffers (ExecuTorch's memory planning with ``share_mutable_buffers``), plus a manifest whose
calling convention a runner in any language can follow (:data:`CONVENTION`).

The CPU side stays with the caller: positions, the additive masks per layer type and the cache
slots each step's K/V go to (:func:`step_inputs` builds them from the runtime's own mask table and
cache bookkeeping; a C++ runner builds them from the manifest).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import torch

from .cpu.inputs import StaticInputs
from .edge import export_for_lowering
from .npu.cached_stack import CachedStack
from .runtime import StaticGemma4Runtime
from .spec import SLIDING_ATTENTION

CACHE_BUFFERS = ("k_cache", "v_cache")

CONVENTION = """\
Each call feeds S tokens per row (S = the method's "tokens"); rows are padded on the right, a row's
valid tokens first. Inputs, in order: input_ids (B, S) int64 (placeholder ids replaced by pad_token_id);
positions (B, S) int64 (a row's absolute positions; padding may repeat the last one); last_index (B,)
int64 (which of the S outputs to return per row); then one additive mask per layer type (B, 1, S, K)
in the manifest's order (0.0 = allowed, mask_fill = forbidden); then one slot tensor per layer type
(B, S) int64. Output: logits (B, vocab) at last_index.
Keys of a layer type that keeps max_seq slots: K = max_seq, slot k holds position k once written.
Keys of a ring layer type (capacity R < max_seq): K = R + S, the R ring slots as they were before
this call (slot s holds the last position p < before with p mod R == s, else nothing), then this
call's S tokens. A query at position q may see a key at position k (held, not padding) iff k <= q,
and on a sliding layer type also q - k < window.
Slots: where a token is kept (a valid token; on a ring, also among its row's last R kept tokens of
the call) its slot is p (max_seq slots) or p mod R (ring); elsewhere the bin slot = capacity.
The cache starts empty (zeros); a new conversation overwrites what it needs (masks hide the rest)."""


def cached_stack(runtime: StaticGemma4Runtime) -> CachedStack:
    """The runtime's text stages as one :class:`~gemma4_static.npu.cached_stack.CachedStack`."""
    modules, text = runtime.modules, runtime.spec.text
    rope = {
        name: (table.cos.to(runtime.spec.dtype), table.sin.to(runtime.spec.dtype))
        for name, table in runtime.stack.rope.tables.items()
    }
    return CachedStack(
        modules.embedding,
        modules.per_layer_inputs,
        modules.layers,
        modules.lm_head,
        layer_types=tuple(text.layer_types),
        sources=tuple(runtime.cache.sources),
        capacities=dict(runtime.cache.capacity),
        rope=rope,
        batch_size=runtime.layout.batch_size,
        max_seq=runtime.layout.max_seq,
    ).eval()


def step_inputs(
    runtime: StaticGemma4Runtime, input_ids: torch.Tensor, positions: torch.Tensor, keep: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    """The program's inputs for ``S`` tokens per row at ``positions (B, S)``, ``keep (B, S)`` marking
    the valid ones (each row's valid tokens first; the cache holds positions ``[0, positions[:, 0])``
    of each row before the call): ids, positions, last index, masks, slots (:data:`CONVENTION`)."""
    stack, cache = runtime.stack, runtime.cache
    before = positions[:, 0]
    written = before + keep.sum(dim=1)
    masks = stack.cache_masks(positions, written, before=before)
    order = tuple(dict.fromkeys(runtime.spec.text.layer_types))
    slots = []
    for name in order:
        capacity, kept = cache.capacity[name], keep
        if cache.is_ring(name):
            last = torch.where(keep, positions, -1).max(dim=1, keepdim=True).values
            kept = keep & (positions > last - capacity)
        slots.append(torch.where(kept, cache.slots(name, positions), capacity))
    last_index = (keep.sum(dim=1) - 1).clamp(min=0)
    args = (input_ids, positions, last_index, *(masks[name] for name in order), *slots)
    return tuple(tensor.contiguous() for tensor in args)  # a program's inputs are dense


def prefill_logits(
    runtime: StaticGemma4Runtime, step: Callable[..., torch.Tensor], inputs: StaticInputs, chunk: int
) -> torch.Tensor:
    """``(B, vocab)``: each row's logits at its last valid token after feeding ``inputs`` (laid out by
    ``runtime.build_inputs``) to ``step`` in calls of ``chunk`` tokens (``step(*step_inputs(...))``:
    the bundle's ``prefill`` method, or a :class:`CachedStack` itself)."""
    lengths = inputs.valid_length
    logits = None
    for start in range(0, int(lengths.max()), chunk):
        span = slice(start, start + chunk)
        positions = torch.arange(start, start + chunk).expand(len(lengths), -1)
        out = step(*step_inputs(runtime, inputs.input_ids[:, span], positions, inputs.valid[:, span]))
        logits = torch.zeros_like(out) if logits is None else logits
        ends_here = (lengths > start) & (lengths <= start + chunk)
        logits[ends_here] = out[ends_here]
    return logits


def export_bundle(runtime: StaticGemma4Runtime, folder: str | Path, *, prefill_tokens: int) -> Path:
    """Write ``folder/model.pte`` (methods ``prefill`` of ``prefill_tokens`` tokens and ``decode`` of
    one, sharing the cache) and ``folder/manifest.json``; returns the manifest path."""
    layout = runtime.layout
    if layout.has_image_slot:
        raise ValueError("a bundle is text-only: build the runtime without image_slots")
    if not isinstance(prefill_tokens, int) or prefill_tokens < 1 or layout.max_seq % prefill_tokens:
        raise ValueError(
            f"prefill_tokens must be a positive divisor of max_seq={layout.max_seq}, got {prefill_tokens!r}"
        )
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower
    from executorch.exir.passes import MemoryPlanningPass
    from executorch.exir.passes.init_mutable_pass import InitializedMutableBufferPass

    module, batch = cached_stack(runtime), layout.batch_size
    programs = {}
    for method, tokens in (("prefill", prefill_tokens), ("decode", 1)):
        positions = torch.arange(tokens).expand(batch, -1)
        ids = torch.full((batch, tokens), runtime.spec.pad_token_id)
        example = step_inputs(runtime, ids, positions, torch.ones_like(positions, dtype=torch.bool))
        programs[method] = export_for_lowering(module, example)
    edge = to_edge_transform_and_lower(programs, partitioner=[XnnpackPartitioner()])
    program = edge.to_executorch(
        ExecutorchBackendConfig(
            passes=[InitializedMutableBufferPass(list(CACHE_BUFFERS))],
            memory_planning_pass=MemoryPlanningPass(alloc_graph_input=False, share_mutable_buffers=True),
            emit_mutable_buffer_names=True,
            run_reinplace_pass=True,
        )
    )
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.pte").write_bytes(program.buffer)
    text = runtime.spec.text
    manifest = {
        "layout": "cache-in-program",
        "file": "model.pte",
        "batch_size": batch,
        "max_seq": layout.max_seq,
        "methods": {"prefill": {"tokens": prefill_tokens}, "decode": {"tokens": 1}},
        "layer_types": [
            {
                "name": name,
                "capacity": runtime.cache.capacity[name],
                "ring": runtime.cache.is_ring(name),
                "window": text.sliding_window if name == SLIDING_ATTENTION else None,
            }
            for name in dict.fromkeys(text.layer_types)
        ],
        "mask_fill": runtime.mask_value,
        "pad_token_id": runtime.spec.pad_token_id,
        "vocab_size": runtime.spec.vocab_size,
        "convention": CONVENTION.splitlines(),
    }
    path = folder / "manifest.json"
    path.write_text(json.dumps(manifest, indent=2) + "\n")
    return path
