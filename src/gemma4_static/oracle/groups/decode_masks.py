"""The ``decode-masks`` check group: the port's decode masks against HF's with a ``DynamicCache``, as
the absolute positions the new token sees after conversations around the window edges."""

from __future__ import annotations

from collections.abc import Iterator

from ...ports import PortSetup
from ...ports.capabilities.host_stages import DECODE_MASKS
from ..checks import parity_masks
from ..references.hf import ATTN_IMPLEMENTATIONS
from ..references.layouts import valid_mask
from ..results.report import Row, merge_by
from ..session.session import Session
from . import CheckGroup
from ._shared import decode_positions

UNWRITTEN = 4  # static slots past a decode's position that must stay invisible


def decode_mask_rows(session: Session) -> Iterator[Row]:
    """The port's decode masks vs HF with a ``DynamicCache``, as the absolute positions the new token
    sees after conversations of lengths around the window edges (one unpadded row; three left-padded
    ones too where the port pads, the layout HF's batched decode uses); slots past the new token must
    stay invisible."""
    positions, limits = decode_positions(session.window), session.under_test.limits.batch
    layouts = [("none", 1)]
    if limits.padding_side is not None and (limits.max_batch is None or limits.max_batch >= 3):
        layouts.append(("left", 3))
    setup = PortSetup(session.static_length(max(positions) + 2 + UNWRITTEN), max(batch for _, batch in layouts))
    with session.built(setup) as port:
        for attn_implementation in ATTN_IMPLEMENTATIONS:
            rows = [
                row
                for position in positions
                for padding, batch in layouts
                for row in parity_masks.decode_mask_rows(
                    session.config, valid_mask(padding, batch, position + 1), attn_implementation, port.decode_masks
                )
            ]
            yield from merge_by(rows, lambda row: f"{row.check} (positions {positions})")


GROUP = CheckGroup(
    name="decode-masks",
    order=40,
    describe="the port's decode masks against HF's DynamicCache after conversations around the window edges "
    "(unpadded and left-padded rows); slots past the new token stay invisible",
    rows=decode_mask_rows,
    needs=(DECODE_MASKS,),
)
