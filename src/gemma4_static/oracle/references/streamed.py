"""HF's model in another dtype without a copy of its weights in that dtype: what judges a real-size
checkpoint within memory.

:func:`streamed` returns a structural clone of an HF model that runs HF's own forward code in
``dtype`` (float64 for the reference of the low-precision profiles) while it holds the weights in
the dtype they were stored in (bfloat16 for every Gemma 4 checkpoint), sharing their storage:

- every element of an ``nn.ModuleList`` (the text decoder's layers, the vision and audio towers'
  layers) gets its parameters up-cast just before its forward and dropped after it: one layer's
  weights exist in ``dtype`` at a time;
- every ``nn.Embedding`` (the token table, the per-layer-embedding table: 2.75 of E2B's 4.63
  billion parameters) is read row-wise: before its forward, the rows of the ids it is called with are
  gathered and up-cast into a table of those rows only, and the ids renumbered into it, so HF's own
  embedding forward (its scaling included) runs on them; a lookup is a gather, so the result is the
  one over the whole table;
- the LM head (``lm_head``, an ``nn.Linear`` whose weight is the token table's in Gemma 4) is applied
  in vocabulary chunks of :data:`HEAD_CHUNK` rows, each up-cast on its own;
- everything else (norms, the per-layer-input projection, floating buffers such as RoPE's inverse
  frequencies) is up-cast once, as ``model.to(dtype)`` would; a buffer HF's init sets from a number
  (the embedding scales) holds that number in ``dtype``, as in HF's model made in ``dtype``.

Up-casting bfloat16 to float32 or float64 is exact, so the clone computes what HF's model of the
same checkpoint loaded in ``dtype`` computes (up to the order of the LM head's sums within a chunk),
at one layer's weights in ``dtype`` instead of the whole model's. Each forward up-casts every layer
again: bandwidth traded for memory. Outside a forward, a streamed parameter reads as the stored one.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

# HF's buffers that its init sets from a Python number the module keeps (Gemma 4's ``_init_weights``):
# buffer -> the attribute holding the number. Cast from a model made in bfloat16 they would keep the
# number rounded to bfloat16 (the token table's scale sqrt(1536) = 39.19 as 39.25: every embedding
# 0.15% off); HF's model made in another dtype holds the number in that dtype.
NUMBER_BUFFERS = {"embed_scale": "scalar_embed_scale", "softcap": "attention_logits_soft_cap"}
HEAD_CHUNK = 16_384  # LM head rows up-cast at a time: 16,384 x 1,536 x 8 bytes = 201 MB in float64 at E2B's width


class VocabularyChunkedHead(nn.Module):
    """An ``nn.Linear`` without bias applied in vocabulary chunks, each chunk of ``weight (V, H)``
    up-cast to the input's dtype on its own: ``(..., H) -> (..., V)``."""

    def __init__(self, weight: nn.Parameter, chunk: int = HEAD_CHUNK) -> None:
        super().__init__()
        self.weight = weight
        self.chunk = chunk

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        rows = self.weight.shape[0]
        parts = [
            F.linear(hidden_states, self.weight[start : start + self.chunk].to(hidden_states.dtype))
            for start in range(0, rows, self.chunk)
        ]
        return torch.cat(parts, dim=-1)


@dataclass(frozen=True)
class StreamingPlan:
    """How :func:`streamed` holds a model's modules: ``layers`` (each up-cast for its forward),
    ``tables`` (read row-wise), ``head`` (applied in vocabulary chunks; ``None`` without an
    ``lm_head``); every other parameter is up-cast once."""

    layers: tuple[nn.Module, ...]
    tables: tuple[nn.Embedding, ...]
    head: nn.Linear | VocabularyChunkedHead | None

    @classmethod
    def of(cls, model: nn.Module) -> StreamingPlan:
        layers = tuple(_outermost_list_elements(model))
        in_layers = {id(module) for layer in layers for module in layer.modules()}
        tables = tuple(m for m in model.modules() if isinstance(m, nn.Embedding) and id(m) not in in_layers)
        head = getattr(model, "lm_head", None)
        chunked = isinstance(head, VocabularyChunkedHead)  # a streamed clone's
        if head is not None and not (chunked or (isinstance(head, nn.Linear) and head.bias is None)):
            raise ValueError(f"model.lm_head must be an nn.Linear without bias, got {head!r}")
        return cls(layers, tables, head)

    def eager_parameters(self, model: nn.Module) -> list[tuple[nn.Module, str, nn.Parameter]]:
        """``(module, name, parameter)`` of every floating parameter up-cast once (none of a layer,
        table or head)."""
        lazy = {id(module) for owner in (*self.layers, *self.tables) for module in owner.modules()}
        lazy |= set() if self.head is None else {id(self.head)}
        return [
            (module, name, parameter)
            for module in model.modules()
            if id(module) not in lazy
            for name, parameter in module._parameters.items()
            if parameter is not None and parameter.is_floating_point()
        ]


def streamed(model: nn.Module, dtype: torch.dtype = torch.float64) -> nn.Module:
    """A clone of HF ``model`` (in eval mode) computing in ``dtype`` with the weights kept in their
    stored dtype and storage (see the module's docstring). ``model`` itself is left as it was."""
    if not dtype.is_floating_point:
        raise ValueError(f"dtype must be a floating dtype, got {dtype}")
    shared = {id(tensor): tensor for tensor in (*model.parameters(), *model.buffers())}
    clone = copy.deepcopy(model, memo=shared)
    plan = StreamingPlan.of(clone)
    for module in clone.modules():
        for name, buffer in module._buffers.items():
            if buffer is not None and buffer.is_floating_point():
                module._buffers[name] = buffer_in(module, name, dtype)
    for module, name, parameter in plan.eager_parameters(clone):
        module._parameters[name] = nn.Parameter(parameter.detach().to(dtype), requires_grad=False)
    for layer in plan.layers:
        _stream_parameters(layer, dtype)
    for table in plan.tables:
        _read_rowwise(table, dtype)
    if plan.head is not None:
        clone.lm_head = VocabularyChunkedHead(plan.head.weight)
    return clone.eval()


def buffer_in(module: nn.Module, name: str, dtype: torch.dtype) -> torch.Tensor:
    """``module``'s floating buffer ``name`` as HF's model made in ``dtype`` holds it: the number it
    was set from (:data:`NUMBER_BUFFERS`) in ``dtype``, else the buffer cast."""
    buffer = module._buffers[name]
    attribute = NUMBER_BUFFERS.get(name)
    number = getattr(module, attribute, None) if attribute else None
    if isinstance(number, int | float):
        return torch.full_like(buffer, number, dtype=dtype)
    return buffer.to(dtype)


def _outermost_list_elements(model: nn.Module) -> Iterator[nn.Module]:
    """Every element of an ``nn.ModuleList`` not itself inside such an element."""
    inside: set[int] = set()
    for module in model.modules():
        if isinstance(module, nn.ModuleList) and id(module) not in inside:
            for element in module:
                inside.update(id(sub) for sub in element.modules())
                yield element


def _stream_parameters(layer: nn.Module, dtype: torch.dtype) -> None:
    """Up-cast ``layer``'s floating parameters to ``dtype`` for each forward; the stored ones after it."""
    owners = [
        (module, name, parameter)
        for module in layer.modules()
        for name, parameter in module._parameters.items()
        if parameter is not None and parameter.is_floating_point()
    ]

    def up_cast(_module: nn.Module, _args: Any) -> None:
        for module, name, parameter in owners:
            module._parameters[name] = nn.Parameter(parameter.detach().to(dtype), requires_grad=False)

    def restore(_module: nn.Module, _args: Any, _output: Any) -> None:
        for module, name, parameter in owners:
            module._parameters[name] = parameter

    layer.register_forward_pre_hook(up_cast)
    layer.register_forward_hook(restore, always_call=True)


def _read_rowwise(table: nn.Embedding, dtype: torch.dtype) -> None:
    """Make ``table`` look up its ids in the up-cast rows they name only (its ``padding_idx``, which
    only shapes gradients, lifted for the call)."""
    stored, padding_idx = table.weight, table.padding_idx

    def gather(module: nn.Embedding, args: tuple[Any, ...]) -> tuple[torch.Tensor, ...]:
        (ids,) = args
        rows, renumbered = torch.unique(ids, return_inverse=True)
        module._parameters["weight"] = nn.Parameter(stored.detach()[rows].to(dtype), requires_grad=False)
        module.padding_idx = None
        return (renumbered,)

    def restore(module: nn.Embedding, _args: Any, _output: Any) -> None:
        module._parameters["weight"] = stored
        module.padding_idx = padding_idx

    table.register_forward_pre_hook(gather)
    table.register_forward_hook(restore, always_call=True)


def kept_tables(model: nn.Module) -> list[nn.Embedding]:
    """The embedding tables :func:`converted` keeps in their stored dtype: every ``nn.Embedding`` but
    the one whose weight the LM head reads whole."""
    head = getattr(model, "lm_head", None)
    read_whole = set() if head is None else {id(head.weight)}
    return [m for m in model.modules() if isinstance(m, nn.Embedding) and id(m.weight) not in read_whole]


def converted(model: nn.Module, dtype: torch.dtype) -> nn.Module:
    """``model`` itself where its floating parameters are all in ``dtype`` already, else a copy with
    every floating parameter and buffer in ``dtype`` (the buffers as in :func:`streamed`; tied weights
    stay tied) but for the embedding tables the LM head
    does not read: those stay in their stored dtype and storage, read row-wise in ``dtype`` (the
    per-layer-embedding table is half of E2B's parameters; a prompt reads a few hundred of its rows).
    A row converted on its own is the row of the converted table, so the copy computes what HF's
    model of the same checkpoint loaded in ``dtype`` computes."""
    if all(parameter.dtype == dtype for parameter in model.parameters() if parameter.is_floating_point()):
        return model
    kept = {id(table.weight) for table in kept_tables(model)}
    memo: dict[int, Any] = {}
    for parameter in model.parameters():
        if parameter.is_floating_point() and id(parameter) not in kept:
            memo[id(parameter)] = nn.Parameter(parameter.detach().to(dtype), requires_grad=False)
        elif id(parameter) in kept:
            memo[id(parameter)] = parameter
    for module in model.modules():
        for name, buffer in module._buffers.items():
            if buffer is not None and buffer.is_floating_point():
                memo[id(buffer)] = buffer_in(module, name, dtype)
    copied = copy.deepcopy(model, memo=memo)
    for table in copied.modules():
        if isinstance(table, nn.Embedding) and id(table.weight) in kept:
            _read_rowwise(table, dtype)
    return copied
