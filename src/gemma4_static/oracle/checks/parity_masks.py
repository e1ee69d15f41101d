"""Mask parity checks: our boolean masks vs HF's (prefill, vision overlay, decode), one row per
layer type, exact (0 differing entries); a failing row carries a diagram of where they differ."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ...cpu.masks import build_chunk_bool_masks
from ...spec import read_text_config
from ..references.hf import hf_decode_visible_positions, hf_prefill_bool_masks
from ..results import tolerances
from ..results.diagrams import mask_diagram
from ..results.report import Row
from .parity import count_row


def _mask_rows(
    stage: str, note: str, ours: dict[str, torch.Tensor], theirs: dict[str, torch.Tensor], valid: torch.Tensor
) -> list[Row]:
    """One row per layer type: differing entries of boolean masks ``(B, 1, Q, K)``; a failing row
    carries a diagram of the first rows that differ (``valid (B, K)`` is the padding layout)."""
    rows = []
    for name in sorted(ours.keys() | theirs.keys()):
        mine, reference = ours.get(name), theirs.get(name)
        check = f"{name} {note}"
        metric = "mismatched slots" if stage == "masks decode" else "mismatched entries"
        if mine is None or reference is None or mine.shape != reference.shape:
            differing = max(t.numel() for t in (mine, reference) if t is not None)  # all of it
            rows.append(count_row(stage, check, metric, differing))
            continue
        diagram = mask_diagram(mine, reference, valid, f"{stage} {check}")
        rows.append(Row(stage, check, metric, int((mine != reference).sum()), tolerances.EXACT, diagram))
    return rows


PrefillMasks = Callable[[torch.Tensor, "torch.Tensor | None"], dict[str, torch.Tensor]]


def prefill_mask_rows(
    config: Any,
    valid: torch.Tensor,
    attn_implementation: str,
    ours: PrefillMasks,
    *,
    mm_token_type_ids: torch.Tensor | None = None,
) -> list[Row]:
    """Boolean prefill masks ``ours(valid, mm_token_type_ids)`` (a port's, e.g. ``port.prefill_masks``)
    vs HF's, one row per layer type (``None`` from HF is expanded, never skipped)."""
    ours = ours(valid, mm_token_type_ids)
    theirs = hf_prefill_bool_masks(
        config, valid, attn_implementation=attn_implementation, mm_token_type_ids=mm_token_type_ids
    )
    stage = "masks vision" if mm_token_type_ids is not None else "masks prefill"
    return _mask_rows(stage, attn_implementation, ours, theirs, valid)


DecodeMasks = Callable[[torch.Tensor], dict[str, torch.Tensor]]


def decode_mask_rows(config: Any, valid: torch.Tensor, attn_implementation: str, ours: DecodeMasks) -> list[Row]:
    """The next token's visible absolute positions ``ours(valid)`` (a port's, e.g.
    ``port.decode_masks``: ``{layer_type: (B, K)}``) vs HF with a ``DynamicCache``, one row per layer
    type.

    ``valid`` ``(B, P + 1)``: ``P`` cached tokens and the new one at position ``P``. HF's sliding
    cache keeps only the last ``window - 1`` keys, so masks are compared as absolute positions; the
    port's ``K - P - 1`` positions past the new token are slots nothing was written to, which must
    stay invisible.
    """
    batch, total = valid.shape
    mine = ours(valid)
    width = max([total, *(mask.shape[-1] for mask in mine.values())])
    theirs = hf_decode_visible_positions(config, valid, attn_implementation=attn_implementation)
    padded = {name: torch.cat((row, row.new_zeros(batch, width - total)), dim=1) for name, row in theirs.items()}
    static_valid = torch.cat((valid.bool(), valid.new_zeros(batch, width - total, dtype=torch.bool)), dim=1)
    mine = {name: mask[:, None, None] for name, mask in mine.items()}  # (B, 1, 1, K): one query row
    padded = {name: mask[:, None, None] for name, mask in padded.items()}
    return _mask_rows("masks decode", attn_implementation, mine, padded, static_valid)


def chunk_mask_rows(
    config: Any,
    valid: torch.Tensor,
    chunk: int,
    attn_implementation: str,
    *,
    mm_token_type_ids: torch.Tensor | None = None,
) -> list[Row]:
    """Chunked-prefill masks vs the rows of HF's single-shot prefill mask, one row per layer type.

    ``valid (B, S)`` is split into chunks of ``chunk`` queries; after chunk ``[s, s + chunk)`` the
    cache holds the valid slots ``< s + chunk``, and ``build_chunk_bool_masks`` over them must equal
    HF's mask rows ``s .. s + chunk`` on those keys (a causal row never sees a later chunk; a vision
    block is kept inside one chunk by the layout)."""
    batch, length = valid.shape
    theirs = hf_prefill_bool_masks(
        config, valid, attn_implementation=attn_implementation, mm_token_type_ids=mm_token_type_ids
    )
    ours_rows: dict[str, list[torch.Tensor]] = {}
    their_rows: dict[str, list[torch.Tensor]] = {}
    view = read_text_config(config)  # read once: a chunk of 1 calls the builder per position
    for start in range(0, length, chunk):
        end = min(start + chunk, length)
        written = valid & (torch.arange(length) < end)
        positions = torch.arange(start, end).expand(batch, -1)
        ours = build_chunk_bool_masks(view, written, positions, mm_token_type_ids=mm_token_type_ids)
        for name, mask in ours.items():
            ours_rows.setdefault(name, []).append(mask)
            their_rows.setdefault(name, []).append(theirs[name][:, :, start:end] & written[:, None, None, :])
    ours_all = {name: torch.cat(rows, dim=2) for name, rows in ours_rows.items()}
    theirs_all = {name: torch.cat(rows, dim=2) for name, rows in their_rows.items()}
    stage = "masks chunk"
    return _mask_rows(stage, f"{attn_implementation}, chunks of {chunk}", ours_all, theirs_all, valid)
