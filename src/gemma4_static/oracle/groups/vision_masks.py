"""The ``vision-masks`` check group: on a model whose attention is bidirectional inside image blocks,
the port's prefill masks over image blocks against HF's vision mask path (no rows on other models)."""

from __future__ import annotations

from collections.abc import Iterator

import torch

from ...ports.capabilities.host_stages import PREFILL_MASKS
from ...spec import read_text_config
from ..checks import parity_masks
from ..references.hf import ATTN_IMPLEMENTATIONS
from ..references.layouts import valid_mask
from ..results.report import Row, skip_row
from ..session.session import Session
from . import CheckGroup


def vision_mask_rows(session: Session) -> Iterator[Row]:
    """Vision-bidirectional prefill masks vs HF's vision mask path (only for such models)."""
    if read_text_config(session.config).use_bidirectional_attention != "vision":
        return
    if not session.under_test.limits.images.accepted:
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


GROUP = CheckGroup(
    name="vision-masks",
    order=60,
    describe="vision-bidirectional prefill masks over image blocks against HF's vision mask path",
    rows=vision_mask_rows,
    reads=(PREFILL_MASKS,),
)
