"""The mask-value group on a port that takes no padding: no query row of it is ever all masked, so
its overflow row is a SKIP saying so (a padded port's is judged: ``test_default_mask_values.py``)."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from gemma4_static.oracle.groups.mask_value import mask_value_rows
from gemma4_static.ports import PortSetup
from gemma4_static.ports.limits import BatchLimits, PortLimits


def _session(model, padding_side: str | None) -> SimpleNamespace:
    port = SimpleNamespace(
        name="one-row port",
        limits=PortLimits(batch=BatchLimits(max_batch=1, padding_side=padding_side)),
        mask_fill_value=lambda: torch.finfo(torch.float32).min,
    )
    return SimpleNamespace(port=port, dtype=torch.float32, setup=PortSetup(32, 1), model=model)


def test_a_port_without_padding_skips_the_overflow_row_saying_why(tiny_model):
    weight, overflow = mask_value_rows(_session(tiny_model, None))
    assert weight.status == "PASS" and weight.metric == "masked weight bound"
    assert overflow.status == "SKIP" and overflow.metric == "overflows to -inf"
    assert overflow.skipped == "one-row port takes no padding: no query row is ever all masked"
    padded = list(mask_value_rows(_session(tiny_model, "left")))[1]
    assert padded.status == "PASS" and not padded.skipped and padded.check == overflow.check
