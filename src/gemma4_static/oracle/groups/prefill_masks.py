"""The ``prefill-masks`` check group: the port's prefill masks against HF's, over padding layouts and
both attention implementations, merged per layer type."""

from __future__ import annotations

from collections.abc import Iterator

from ...ports import PortSetup
from ...ports.capabilities.host_stages import PREFILL_MASKS
from ..checks import parity_masks
from ..references.hf import ATTN_IMPLEMENTATIONS
from ..references.layouts import LENGTHS, PADDINGS, sequence_length, valid_mask
from ..results.report import Row, merge_by
from ..session.session import Session
from . import CheckGroup


def prefill_mask_rows(session: Session) -> Iterator[Row]:
    """The port's prefill masks vs HF under each attention implementation, over lengths x batch x
    padding (the layouts the port takes: one unpadded row for a port without padding)."""
    limits = session.under_test.limits.batch
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


GROUP = CheckGroup(
    name="prefill-masks",
    order=30,
    describe="the port's prefill masks against HF's, over lengths, batches, padding layouts and both attention "
    "implementations",
    rows=prefill_mask_rows,
    needs=(PREFILL_MASKS,),
)
