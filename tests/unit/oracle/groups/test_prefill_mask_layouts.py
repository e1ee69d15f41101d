"""The ``prefill-masks`` group builds its port for the layouts it asks: the longest and the most rows
of its cases (a port whose masks are a static graph of the batch it was built for refuses more
rows); every layout's masks are then compared and pass on this runtime behind such a port."""

from __future__ import annotations

from typing import Any

import torch

from gemma4_static.oracle.faults.port_faults import WrappedRuntimePort
from gemma4_static.oracle.flow.verify import verify
from gemma4_static.oracle.options import VerifyOptions


class StaticBatchMasks(WrappedRuntimePort):
    """This runtime behind a port whose prefill masks hold the rows and length it was built for."""

    name = "static batch masks"

    def prefill_masks(self, attention_mask: torch.Tensor, mm_token_type_ids: Any = None) -> dict[str, torch.Tensor]:
        rows, length = attention_mask.shape
        setup = self.inner.setup
        if rows > setup.batch_size or length > setup.max_seq:
            built = f"{setup.batch_size} x {setup.max_seq}"
            raise ValueError(f"attention_mask: {rows} x {length} for a port built for {built}")
        return super().prefill_masks(attention_mask, mm_token_type_ids)


def test_the_port_is_built_for_every_layout_the_group_asks(tiny_model):
    rows = verify(tiny_model, VerifyOptions(port=f"{__name__}:StaticBatchMasks", groups=("prefill-masks",))).rows
    masks = [row for row in rows if row.stage == "masks prefill"]
    assert masks and all(row.compared and not row.failed for row in masks), [(r.check, r.raised[-200:]) for r in masks]
