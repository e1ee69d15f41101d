"""The text model in the cache-in-program form: one ExecuTorch program whose KV cache lives inside
it, with a ``prefill`` method (a chunk of ``C`` tokens) and a ``decode`` method (one token) sharing
the cache buffers (ExecuTorch's memory planning with ``share_mutable_buffers``).

The CPU side stays outside the program: positions, the additive masks per layer type and the cache
slots each step's K/V go to come from the :class:`~gemma4_static.stack.LayerStack`'s own mask table
and cache bookkeeping (:mod:`~gemma4_static.executorch.step_inputs`). :class:`CacheProgram` is what the
runtime's ``backend="executorch"`` drives; :mod:`~gemma4_static.bundle` writes the program to a file.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from ..cpu.inputs import StaticInputs
from ..stack import LayerStack
from .cached_stack import CachedStack
from .lowering import export_for_lowering, lower
from .program_cache import forget_programs
from .step_inputs import prefill_logits, prefill_method_tokens, step_inputs

log = logging.getLogger(__name__)

CACHE_BUFFERS = ("k_cache", "v_cache")
METHODS = ("prefill", "decode")
ONE_PROGRAM = "one program"  # the label of the one-program form among the lowered programs


def cached_stack(stages: Any, stack: LayerStack, *, trace: bool = False) -> CachedStack:
    """The text ``stages`` (PyTorch modules) at ``stack``'s layout as one
    :class:`~gemma4_static.executorch.cached_stack.CachedStack` (``trace``: also every layer's output)."""
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
        fill=stack.fill,
        trace=trace,
    ).eval()


def lower_program(
    module: nn.Module,
    stack: LayerStack,
    chunk: int,
    methods: tuple[str, ...] = METHODS,
    quantize: Callable[[str, torch.fx.GraphModule], torch.fx.GraphModule] | None = None,
    *,
    identity: tuple | None = None,
) -> bytes:
    """``module`` (a :class:`CachedStack`) as one ExecuTorch program with ``methods`` (``prefill``:
    ``chunk`` tokens, ``decode``: one) sharing its mutable cache buffers, which start at zeros;
    ``quantize(method, graph)`` turns each exported method into a quantized graph first (PT2E:
    :mod:`.xnnpack_quant`); ``identity`` names it in this process (default: this module at this
    chunk). Returns the ``.pte`` bytes (through the cache: :mod:`.program_cache`)."""
    batch, pad = stack.layout.batch_size, stack.spec.pad_token_id

    def exported() -> dict[str, torch.export.ExportedProgram]:
        programs = {}
        for method in methods:
            tokens = 1 if method == "decode" else chunk
            positions = torch.arange(tokens).expand(batch, -1)
            ids = torch.full((batch, tokens), pad)
            example = step_inputs(stack, ids, positions, torch.ones_like(positions, dtype=torch.bool))
            programs[method] = export_for_lowering(module, example)
            if quantize is not None:
                programs[method] = export_for_lowering(quantize(method, programs[method].module()), example)
        return programs

    identity = (ONE_PROGRAM, id(module), chunk, methods) if identity is None else identity
    lowered = lower(
        identity, module, exported, mutable_buffers=CACHE_BUFFERS, label=ONE_PROGRAM, quantized=quantize is not None
    )
    return lowered.buffer


@contextlib.contextmanager
def fresh_programs(backend: str) -> Iterator[None]:
    """On an ExecuTorch ``backend``: no program this process holds from before the block is reused in
    it, and none it lowers in it outlives it (e.g. while a fault is injected into the stages' code; the
    disk cache, keyed by content, stays: a changed stage is another key); nothing on ``"torch"``."""
    if backend == "torch":
        yield
        return
    forget_programs()
    try:
        yield
    finally:
        forget_programs()


class CacheProgram:
    """The runtime's text stages as one cache-in-program ExecuTorch program (lowered on first use,
    the bytes shared by runtimes of the same weights and layout), fed by ``stack``'s CPU side; its
    prefill method takes :func:`prefill_method_tokens` tokens."""

    def __init__(self, stages: Any, stack: LayerStack, quantization: Any = None) -> None:
        self.stages, self.stack, self.chunk = stages, stack, prefill_method_tokens(stack.layout)
        self.quantization = quantization  # an XnnpackQuantization: the program's methods quantized
        self._loaded: dict[bool, tuple[bytes, Any, dict[str, Any]]] = {}  # trace -> (bytes, program, methods)
        self._eager: dict[bool, CachedStack] = {}  # trace -> the module run in float while calibrating
        self._owed: list[tuple[torch.Tensor, ...]] = []  # prefill calls the program's own cache still needs

    def methods(self, *, trace: bool = False) -> dict[str, Any]:
        """The loaded methods: ``prefill`` and ``decode``, or (``trace``) a separate program whose
        ``prefill`` also returns every layer's output (for debugging; its cache is its own). While a
        quantization calibrates: the module in float PyTorch, recording each method's inputs."""
        names = ("prefill",) if trace else METHODS
        quantization = self.quantization
        if quantization is not None and quantization.recording:
            if trace not in self._eager:
                self._eager[trace] = cached_stack(self.stages, self.stack, trace=trace)
            stage = self._stage(trace)
            return {name: _Recorded(self._eager[trace], quantization, stage, self._signature(name)) for name in names}
        if trace not in self._loaded:
            from executorch.runtime import Runtime

            module = cached_stack(self.stages, self.stack, trace=trace)
            quantize = None if quantization is None else functools.partial(self._quantized, self._stage(trace))
            buffer = lower_program(module, self.stack, self.chunk, names, quantize, identity=self._key(trace))
            program = Runtime.get().load_program(buffer)
            self._loaded[trace] = (buffer, program, {name: program.load_method(name) for name in names})
        return self._loaded[trace][2]

    def _quantized(self, stage: tuple, method: str, graph: torch.fx.GraphModule) -> torch.fx.GraphModule:
        return self.quantization.quantized(graph, stage, self._signature(method))

    def _stage(self, trace: bool) -> tuple:
        """What a quantization keys the program's observers by: its weights and form (any layout)."""
        parts = (self.stages.embedding, self.stages.per_layer_inputs, *self.stages.layers, self.stages.lm_head)
        return ("program", tuple(id(parameter) for part in parts for parameter in part.parameters()), trace)

    def _signature(self, method: str) -> tuple:
        layout = self.stack.layout
        return (layout.batch_size, layout.max_seq, layout.sliding_cache, self.chunk, self.stack.spec.dtype, method)

    def _key(self, trace: bool) -> tuple:
        """What identifies the program: its weights and form, the layout, the dtype and the
        quantization's observer states (runtimes that adopted one calibration share its programs)."""
        observers = None if self.quantization is None else id(self.quantization.observers)
        return (*self._stage(trace), self._signature(""), observers)

    def size(self) -> int:
        """Bytes of the ``.pte`` program (lowered if it was not yet)."""
        self.methods()
        return len(self._loaded[False][0])

    def prefill(
        self,
        inputs: StaticInputs,
        fused: torch.Tensor | None,
        blocks: torch.Tensor | None,
        chunks: list[int],
        states: list[torch.Tensor] | None = None,
        chunk_ends: list[torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Logits ``(B, vocab)`` at each row's last valid token after calls of the ``prefill`` method
        over ``chunks`` (each at most the method's length, padded to it); the program's cache holds the
        prompt. With ``states``, the traced program also runs the prompt and collects every layer's
        output, and the program's own ``prefill`` runs the same calls when a :meth:`decode` first needs
        its cache (a prefill only inspected lowers and runs the traced twin alone); ``chunk_ends``
        collects each call's logits."""
        longest = max(chunks)
        if longest > self.chunk:
            method = f"the prefill method's {self.chunk} (backend 'executorch')"
            raise ValueError(f"schedule: a chunk of {longest} tokens exceeds {method}")
        run = functools.partial(
            prefill_logits, self.stack, inputs=inputs, chunks=chunks, fused=fused, blocks=blocks, chunk_ends=chunk_ends
        )
        self._owed = []
        if states is None:
            return run(_copied(self.methods()["prefill"], first=True), tokens=self.chunk)
        traced = _copied(self.methods(trace=True)["prefill"])

        def step(*args: torch.Tensor) -> Any:
            self._owed.append(args)  # the inputs of each call, for the program's own cache
            return traced(*args)

        logits = run(step, tokens=self.chunk, states=states)
        if self.quantization is not None and self.quantization.recording:
            self._settle()  # a calibration sees every call of the program's own prefill, as it runs
        return logits

    def decode(self, next_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Logits ``(B, vocab)`` for one token per row ``(B, 1)`` at ``positions (B, 1)`` (the prompt's
        owed prefill calls first, where it was prefilled through the traced twin)."""
        self._settle()
        keep = torch.ones_like(positions, dtype=torch.bool)
        return _copied(self.methods()["decode"], first=True)(*step_inputs(self.stack, next_ids, positions, keep))

    def _settle(self) -> None:
        """The owed calls of the program's own ``prefill`` (its cache takes the prompt)."""
        owed, self._owed = self._owed, []
        if owed:
            prefill = self.methods()["prefill"]
            for args in owed:
                prefill.execute(list(args))


def _copied(method: Any, *, first: bool = False) -> Callable[..., Any]:
    """``method`` as a function of its inputs returning copies of its outputs (a method reuses its
    output buffers on its next call): all of them, or the ``first``."""

    def call(*args: torch.Tensor) -> Any:
        outputs = method.execute(list(args))
        return outputs[0].clone() if first else tuple(output.clone() for output in outputs)

    return call


class _Recorded:
    """A method stand-in while a quantization calibrates: records the inputs under ``stage`` and
    ``signature`` and runs ``module`` (the program's module, in float PyTorch), returning its outputs
    flat like a method."""

    def __init__(self, module: nn.Module, quantization: Any, stage: tuple, signature: tuple) -> None:
        self.module, self.quantization, self.stage, self.signature = module, quantization, stage, signature

    def execute(self, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        self.quantization.record(self.stage, self.signature, inputs)
        with torch.no_grad():
            outputs = self.module(*inputs)
        return list(outputs) if isinstance(outputs, tuple) else [outputs]
