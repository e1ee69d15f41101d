"""The ``chunk-masks`` check group: this runtime's chunked-prefill masks against the rows of HF's
single-shot mask, chunks around the window (it reads this project's runtime itself)."""

from __future__ import annotations

from collections.abc import Iterator

from ...ports.capabilities.runtime_internals import RUNTIME_INTERNALS
from ..checks import parity_masks
from ..references.hf import ATTN_IMPLEMENTATIONS
from ..references.layouts import sequence_length, valid_mask
from ..results.report import Row, merge_by
from ..session.session import Session
from . import CheckGroup


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


GROUP = CheckGroup(
    name="chunk-masks",
    order=50,
    describe="this runtime's chunked-prefill masks against the rows of HF's single-shot mask, chunks around the window",
    rows=chunk_mask_rows,
    needs=(RUNTIME_INTERNALS,),
)
