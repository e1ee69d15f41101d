"""The ``prefill-masks`` group builds its port for the layouts it asks: the longest and the most rows
of its cases (a port whose masks are a static graph of the batch it was built for refuses more
rows); every layout's masks are then compared and pass on this runtime behind such a port. A port of
one unpadded row is asked each length once, unpadded (the default port's 24 layouts are its group
pair's)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

import torch

from gemma4_static.oracle.checks import parity_masks
from gemma4_static.oracle.faults.port_faults import WrappedRuntimePort
from gemma4_static.oracle.flow.verify import verify
from gemma4_static.oracle.groups.vision_masks import vision_mask_rows
from gemma4_static.oracle.options import VerifyOptions
from gemma4_static.ports import BatchLimits
from gemma4_static.ports.static import StaticRuntimePort


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


def test_the_vision_masks_prompt_holds_a_block_past_the_window_and_text_past_the_block(tiny_model, monkeypatch):
    """The ``vision-masks`` group's one layout, for a window W of 4: row 0 an image block of 2W from
    position 2 then W + 2 text positions; row 1 two blocks of W / 2 one text token apart; right-padded
    (row b drops b + 1 tokens); asked of both HF attention paths (the comparison stubbed)."""
    asked = []

    def recorded(config, valid, attn_implementation, prefill_masks, mm_token_type_ids):
        asked.append((attn_implementation, valid, mm_token_type_ids))
        return iter(())

    monkeypatch.setattr(parity_masks, "prefill_mask_rows", recorded)
    accepted = SimpleNamespace(limits=SimpleNamespace(images=SimpleNamespace(accepted=True)))
    port = SimpleNamespace(name="a port", prefill_masks=None)
    assert (
        list(vision_mask_rows(SimpleNamespace(config=tiny_model.config, window=4, under_test=accepted, port=port)))
        == []
    )
    types = torch.tensor([[0, 0, *[1] * 8, *[0] * 6], [0, 1, 1, 0, 1, 1, *[0] * 10]])
    valid = torch.tensor([[True] * 15 + [False], [True] * 14 + [False] * 2])
    assert [implementation for implementation, _, _ in asked] == ["eager", "sdpa"]
    assert all(torch.equal(mask, valid) and torch.equal(kinds, types) for _, mask, kinds in asked)


class OneUnpaddedRow(StaticRuntimePort):
    """This runtime declared as taking one row without padding."""

    limits = dataclasses.replace(StaticRuntimePort.limits, batch=BatchLimits(max_batch=1, padding_side=None))


def test_a_port_of_one_unpadded_row_is_asked_each_length_once_unpadded(tiny_model):
    rows = verify(tiny_model, VerifyOptions(port=f"{__name__}:OneUnpaddedRow", groups=("prefill-masks",))).rows
    checks = [row.check for row in rows]
    expected = [
        f"{kind} {implementation} (3 layouts)"
        for implementation in ("eager", "sdpa")
        for kind in ("sliding_attention", "full_attention")
    ]
    assert sorted(checks) == sorted(expected), checks
    assert all(row.compared and not row.failed for row in rows), rows
