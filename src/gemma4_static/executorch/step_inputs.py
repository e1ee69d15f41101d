"""The CPU side of the cache-in-program form (:mod:`~gemma4_static.executorch.cache_program`): each call's inputs
from the :class:`~gemma4_static.stack.LayerStack`'s own mask table and cache bookkeeping
(:func:`step_inputs`, the convention ``bundle.CONVENTION`` states), a prompt fed in calls of the
prefill method's length (:func:`prefill_logits`) and that length (:func:`prefill_method_tokens`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..cpu.inputs import StaticInputs
from ..cpu.layout import StaticLayout
from ..cpu.schedule import chunk_starts
from ..stack import LayerStack

PREFILL_TOKENS = 256  # the prefill method's length without a prefill_chunk, where it tiles the layout


def prefill_method_tokens(layout: StaticLayout) -> int:
    """The ``prefill`` method's length: the layout's ``prefill_chunk``; else :data:`PREFILL_TOKENS` where
    it divides ``max_seq`` and splits no image slot (a prompt costs the chunks it fills, not all of
    ``max_seq``); else ``max_seq`` (one call)."""
    if layout.prefill_chunk is not None:
        return layout.prefill_chunk
    tiles = layout.max_seq % PREFILL_TOKENS == 0 and not layout.slots_crossing(PREFILL_TOKENS)
    return PREFILL_TOKENS if tiles else layout.max_seq


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
        capacity, kept = cache.capacity[name], cache.kept(name, positions, keep)
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
    *,
    inputs: StaticInputs,
    chunks: list[int],
    tokens: int,
    fused: torch.Tensor | None = None,
    blocks: torch.Tensor | None = None,
    states: list[torch.Tensor] | None = None,
    chunk_ends: list[torch.Tensor] | None = None,
) -> torch.Tensor:
    """``(B, vocab)``: each row's logits at its last valid token after feeding ``inputs`` (laid out at
    ``(B, max_seq)``) to ``step`` in ``chunks`` (lengths in order), each call ``tokens`` long (a shorter
    chunk padded: its padding is kept out of the cache and its queries' outputs are dropped;
    ``step(*step_inputs(...))``: a program's ``prefill`` method, or a :class:`CachedStack` itself).
    ``fused (B, max_seq, H)``: the embeddings with the images' soft tokens in their slots (taken where
    ``inputs.mm_token_type_ids`` is set). With ``states`` (a traced ``step`` returning ``(logits, (L +
    1, B, C, H))``) it collects each layer's input and output over the chunks, ``(B, max_seq, H)``
    each; ``chunk_ends`` collects each call's logits (each row's at its last token in the call)."""
    lengths, max_seq = inputs.valid_length, stack.layout.max_seq
    embedded = inputs.mm_token_type_ids.bool() if fused is not None else None
    logits, traced = None, []
    for start, chunk in zip(chunk_starts(chunks), chunks, strict=True):
        span = torch.arange(start, start + tokens).clamp(max=max_seq - 1)  # a padded call's tail repeats a slot
        keep = inputs.valid[:, span] & (torch.arange(tokens) < chunk)
        positions = torch.arange(start, start + tokens).clamp(max=max_seq - 1).expand(len(lengths), -1)
        args = step_inputs(
            stack,
            inputs.input_ids[:, span],
            positions,
            keep,
            embeddings=None if fused is None else fused[:, span],
            embedded=None if embedded is None else embedded[:, span],
            blocks=blocks,
        )
        out = step(*args)
        if states is not None:
            out, chunk_states = out
            traced.append(chunk_states[:, :, :chunk])
        if chunk_ends is not None:
            chunk_ends.append(out)
        logits = torch.zeros_like(out) if logits is None else logits
        ends_here = (lengths > start) & (lengths <= start + chunk)
        logits[ends_here] = out[ends_here]
    if states is not None:
        every = torch.cat(traced, dim=2)
        padded = every.new_zeros(*every.shape[:2], max_seq, every.shape[-1])
        padded[:, :, : every.shape[2]] = every
        states.extend(padded.unbind(0))
    return logits
