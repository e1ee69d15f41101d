"""The mask check groups of :mod:`.verify`: prefill, chunk and vision masks against HF's (decode masks:
:mod:`.verify_host`),
over padding layouts and both attention implementations, merged per layer type."""

from __future__ import annotations

from collections.abc import Iterator

import torch

from ...ports.base import PortSetup
from ...spec import read_text_config
from ..checks import parity_masks
from ..checks.report import Row, merge_by, skip_row
from ..references.hf import ATTN_IMPLEMENTATIONS
from ..references.layouts import LENGTHS, PADDINGS, sequence_length, valid_mask
from .session import Session


def prefill_mask_rows(session: Session) -> Iterator[Row]:
    """The port's prefill masks vs HF under each attention implementation, over lengths x batch x
    padding (the layouts the port takes: one unpadded row for a port without padding)."""
    limits = session.port.limits
    batches = [batch for batch in (1, 3) if limits.max_batch is None or batch <= limits.max_batch]
    paddings = PADDINGS if limits.padding_side is not None else ("none",)
    cases = [
        valid_mask(padding, batch, sequence_length(kind, session.window))
        for kind in LENGTHS
        for batch in batches
        for padding in paddings
    ]
    # a port sized for the longest layout (a static port's masks are as long as its max_seq)
    with session.built(PortSetup(max(case.shape[1] for case in cases), max(batches))) as port:
        for attn_implementation in ATTN_IMPLEMENTATIONS:
            rows = [
                row
                for valid in cases
                for row in parity_masks.prefill_mask_rows(
                    session.config, valid, attn_implementation, port.prefill_masks
                )
            ]
            suffix = f"({len(cases)} layouts)"
            yield from merge_by(rows, lambda row, suffix=suffix: f"{row.check} {suffix}")


def chunk_mask_rows(session: Session) -> Iterator[Row]:
    """This runtime's chunked-prefill masks vs the rows of HF's single-shot mask, chunks around the window."""
    window = session.window
    chunks = sorted({max(1, window - 1), window, window + 1})
    valid = valid_mask("right", 3, sequence_length("above", window))
    for attn_implementation in ATTN_IMPLEMENTATIONS:
        rows = [
            row
            for chunk in chunks
            for row in parity_masks.chunk_mask_rows(session.config, valid, chunk, attn_implementation)
        ]
        label = f"{attn_implementation}, chunks of {chunks}"
        yield from merge_by(rows, lambda row, label=label: f"{row.check.split()[0]} {label}")


def vision_mask_rows(session: Session) -> Iterator[Row]:
    """Vision-bidirectional prefill masks vs HF's vision mask path (only for such models)."""
    if read_text_config(session.config).use_bidirectional_attention != "vision":
        return
    if not session.port.limits.images:
        yield skip_row("masks vision", "image blocks", f"{session.port.name} takes no images")
        return
    window = session.window
    length = 3 * window + 4
    types = torch.zeros(2, length, dtype=torch.long)
    types[0, 2 : 2 + 2 * window] = 1  # an image block longer than the window
    types[1, 1 : 1 + window // 2] = 1
    types[1, 2 + window // 2 : 2 + window] = 1
    valid = valid_mask("right", 2, length)
    for attn_implementation in ATTN_IMPLEMENTATIONS:
        yield from parity_masks.prefill_mask_rows(
            session.config, valid, attn_implementation, session.port.prefill_masks, mm_token_type_ids=types
        )
