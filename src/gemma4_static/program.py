"""The text model in the cache-in-program form: one ExecuTorch program whose KV cache lives inside
it, with a ``prefill`` method (a chunk of ``C`` tokens) and a ``decode`` method (one token) sharing
the cache buffers (ExecuTorch's memory planning with ``share_mutable_buffers``).

The CPU side stays outside the program: positions, the additive masks per layer type and the cache
slots each step's K/V go to come from the :class:`~gemma4_static.stack.LayerStack`'s own mask table
and cache bookkeeping (:func:`step_inputs`). :class:`CacheProgram` is what the runtime's
``backend="executorch"`` drives; :mod:`~gemma4_static.bundle` writes the same program to a file.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from .cpu.inputs import StaticInputs
from .edge import export_for_lowering
from .npu.cached_stack import CachedStack
from .stack import LayerStack

CACHE_BUFFERS = ("k_cache", "v_cache")
METHODS = ("prefill", "decode")


def cached_stack(stages: Any, stack: LayerStack, *, trace: bool = False) -> CachedStack:
    """The text ``stages`` (PyTorch modules) at ``stack``'s layout as one
    :class:`~gemma4_static.npu.cached_stack.CachedStack` (``trace``: also every layer's output)."""
    spec, cache = stack.spec, stack.cache
    rope = {name: (table.cos.to(spec.dtype), table.sin.to(spec.dtype)) for name, table in stack.rope.tables.items()}
    return CachedStack(
        stages.embedding,
        stages.per_layer_inputs,
        stages.layers,
        stages.lm_head,
        layer_types=tuple(spec.text.layer_types),
        sources=tuple(cache.sources),
        capacities=dict(cache.capacity),
        rope=rope,
        batch_size=stack.layout.batch_size,
        max_seq=stack.layout.max_seq,
        trace=trace,
    ).eval()


def step_inputs(
    stack: LayerStack,
    input_ids: torch.Tensor,
    positions: torch.Tensor,
    keep: torch.Tensor,
    *,
    embeddings: torch.Tensor | None = None,
    embedded: torch.Tensor | None = None,
    blocks: torch.Tensor | None = None,
) -> tuple[torch.Tensor, ...]:
    """The program's inputs for ``S`` tokens per row at ``positions (B, S)``, ``keep (B, S)`` marking
    the valid ones (each row's valid tokens first; the cache holds positions ``[0, positions[:, 0])``
    of each row before the call): ids, embeddings ``(B, S, H)`` and ``embedded (B, S)`` bool (which
    tokens enter as their row of ``embeddings``; none by default), positions, last index, masks
    (image ``blocks`` ``(B, max_seq)`` as the mask table takes them), slots (``bundle.CONVENTION``)."""
    cache, dtype = stack.cache, stack.spec.dtype
    before = positions[:, 0]
    written = before + keep.sum(dim=1)
    masks = stack.cache_masks(positions, written, blocks, before=before)
    order = tuple(dict.fromkeys(stack.spec.text.layer_types))
    slots = []
    for name in order:
        capacity, kept = cache.capacity[name], keep
        if cache.is_ring(name):
            last = torch.where(keep, positions, -1).max(dim=1, keepdim=True).values
            kept = keep & (positions > last - capacity)
        slots.append(torch.where(kept, cache.slots(name, positions), capacity))
    last_index = (keep.sum(dim=1) - 1).clamp(min=0)
    if embeddings is None:
        embeddings = torch.zeros(*input_ids.shape, stack.spec.hidden_size, dtype=dtype)
    embedded = torch.zeros_like(input_ids, dtype=torch.bool) if embedded is None else embedded
    args = (
        input_ids,
        embeddings,
        embedded[..., None].to(dtype),
        positions,
        last_index,
        *(masks[name] for name in order),
        *slots,
    )
    return tuple(tensor.contiguous() for tensor in args)  # a program's inputs are dense


def prefill_logits(
    stack: LayerStack,
    step: Callable[..., Any],
    inputs: StaticInputs,
    chunk: int,
    *,
    fused: torch.Tensor | None = None,
    blocks: torch.Tensor | None = None,
    states: list[torch.Tensor] | None = None,
) -> torch.Tensor:
    """``(B, vocab)``: each row's logits at its last valid token after feeding ``inputs`` (laid out at
    ``(B, max_seq)``) to ``step`` in calls of ``chunk`` tokens (``step(*step_inputs(...))``: a program's
    ``prefill`` method, or a :class:`CachedStack` itself). ``fused (B, max_seq, H)``: the embeddings
    with the images' soft tokens in their slots (taken where ``inputs.mm_token_type_ids`` is set).
    With ``states`` (a traced ``step`` returning ``(logits, (L + 1, B, C, H))``) it collects each
    layer's input and output over the chunks, ``(B, max_seq, H)`` each."""
    lengths = inputs.valid_length
    embedded = inputs.mm_token_type_ids.bool() if fused is not None else None
    logits, traced = None, []
    for start in range(0, int(lengths.max()), chunk):
        span = slice(start, start + chunk)
        positions = torch.arange(start, start + chunk).expand(len(lengths), -1)
        args = step_inputs(
            stack,
            inputs.input_ids[:, span],
            positions,
            inputs.valid[:, span],
            embeddings=None if fused is None else fused[:, span],
            embedded=None if embedded is None else embedded[:, span],
            blocks=blocks,
        )
        out = step(*args)
        if states is not None:
            out, chunk_states = out
            traced.append(chunk_states)
        logits = torch.zeros_like(out) if logits is None else logits
        ends_here = (lengths > start) & (lengths <= start + chunk)
        logits[ends_here] = out[ends_here]
    if states is not None:
        every = torch.cat(traced, dim=2)
        padded = every.new_zeros(*every.shape[:2], stack.layout.max_seq, every.shape[-1])
        padded[:, :, : every.shape[2]] = every
        states.extend(padded.unbind(0))
    return logits


def lower_program(module: nn.Module, stack: LayerStack, chunk: int, methods: tuple[str, ...] = METHODS) -> bytes:
    """``module`` (a :class:`CachedStack`) lowered with XNNPACK to one ExecuTorch program with
    ``methods`` (``prefill``: ``chunk`` tokens, ``decode``: one) sharing its mutable cache buffers,
    which start at zeros; returns the ``.pte`` bytes."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower
    from executorch.exir.passes import MemoryPlanningPass
    from executorch.exir.passes.init_mutable_pass import InitializedMutableBufferPass

    batch, pad = stack.layout.batch_size, stack.spec.pad_token_id
    programs = {}
    for method in methods:
        tokens = 1 if method == "decode" else chunk
        positions = torch.arange(tokens).expand(batch, -1)
        ids = torch.full((batch, tokens), pad)
        example = step_inputs(stack, ids, positions, torch.ones_like(positions, dtype=torch.bool))
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
    return program.buffer


# (weights, layout, methods) -> (the module, its .pte bytes); each runtime loads its own copy, so
# two runtimes never share a cache; holding the module keeps the weights' ids from being reused
_LOWERED: dict[tuple, tuple[nn.Module, bytes]] = {}


class CacheProgram:
    """The runtime's text stages as one cache-in-program ExecuTorch program (lowered on first use,
    the bytes shared by runtimes of the same weights and layout), fed by ``stack``'s CPU side;
    ``chunk`` is the prefill method's length (a divisor of ``max_seq``)."""

    def __init__(self, stages: Any, stack: LayerStack, chunk: int) -> None:
        self.stages, self.stack, self.chunk = stages, stack, chunk
        self._loaded: dict[bool, tuple[bytes, Any, dict[str, Any]]] = {}  # trace -> (bytes, program, methods)

    def methods(self, *, trace: bool = False) -> dict[str, Any]:
        """The loaded methods: ``prefill`` and ``decode``, or (``trace``) a separate program whose
        ``prefill`` also returns every layer's output (for debugging; its cache is its own)."""
        if trace not in self._loaded:
            from executorch.runtime import Runtime

            module = cached_stack(self.stages, self.stack, trace=trace)
            layout = self.stack.layout
            names = ("prefill",) if trace else METHODS
            weights = tuple(id(parameter) for parameter in module.parameters())
            shape = (layout.batch_size, layout.max_seq, layout.sliding_cache, self.chunk)
            key = (weights, shape, names, self.stack.spec.dtype)
            if key not in _LOWERED:
                _LOWERED[key] = (module, lower_program(module, self.stack, self.chunk, names))
            buffer = _LOWERED[key][1]
            program = Runtime.get().load_program(buffer)
            self._loaded[trace] = (buffer, program, {name: program.load_method(name) for name in names})
        return self._loaded[trace][2]

    def size(self) -> int:
        """Bytes of the ``.pte`` program (lowered if it was not yet)."""
        self.methods()
        return len(self._loaded[False][0])

    def prefill(
        self,
        inputs: StaticInputs,
        fused: torch.Tensor | None,
        blocks: torch.Tensor | None,
        states: list[torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Logits ``(B, vocab)`` at each row's last valid token; the program's cache holds the prompt.
        With ``states``, the traced program also runs the prompt and collects every layer's output."""
        if states is not None:
            traced = self.methods(trace=True)["prefill"]
            prefill_logits(self.stack, _copied(traced), inputs, self.chunk, fused=fused, blocks=blocks, states=states)
        method = self.methods()["prefill"]
        return prefill_logits(self.stack, _copied(method, first=True), inputs, self.chunk, fused=fused, blocks=blocks)

    def decode(self, next_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Logits ``(B, vocab)`` for one token per row ``(B, 1)`` at ``positions (B, 1)``."""
        keep = torch.ones_like(positions, dtype=torch.bool)
        return _copied(self.methods()["decode"], first=True)(*step_inputs(self.stack, next_ids, positions, keep))


def _copied(method: Any, *, first: bool = False) -> Callable[..., Any]:
    """``method`` as a function of its inputs returning copies of its outputs (a method reuses its
    output buffers on its next call): all of them, or the ``first``."""

    def call(*args: torch.Tensor) -> Any:
        outputs = method.execute(list(args))
        return outputs[0].clone() if first else tuple(output.clone() for output in outputs)

    return call
