"""The ``decode-masks`` group asks every port for the layouts it decodes: one unpadded row always,
and three ragged rows left-padded (HF's batched decode layout) wherever the port pads (either side)
and takes three rows, on a port built for that many; a port's masks that ignore key padding fail
there, and only there."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from gemma4_static.oracle.faults.host_faults import HostStagesPort
from gemma4_static.oracle.flow.verify import verify
from gemma4_static.oracle.options import VerifyOptions
from gemma4_static.ports import BatchLimits

SEEN: list[tuple[int, bool]] = []  # (rows, whether any is padded) of every decode_masks call
PAST: list[int] = []  # the static slots past the new token of every decode_masks call


class Recording(HostStagesPort):
    """This runtime's decode masks, each call's layout recorded; like a static port, it refuses more
    rows than it was built for."""

    def decode_masks(self, attention_mask: torch.Tensor) -> dict[str, torch.Tensor]:
        rows = attention_mask.shape[0]
        if rows > self.inner.setup.batch_size:
            raise ValueError(f"built for {self.inner.setup.batch_size} rows, asked for {rows}")
        SEEN.append((rows, not bool(attention_mask.bool().all())))
        masks = super().decode_masks(attention_mask)
        PAST.append(min(mask.shape[-1] for mask in masks.values()) - attention_mask.shape[1])
        return masks


class PaddingVisible(Recording):
    """Decode masks that let the new token see padded slots (its valid keys taken as every slot so far)."""

    def decode_masks(self, attention_mask: torch.Tensor) -> dict[str, torch.Tensor]:
        return super().decode_masks(torch.ones_like(attention_mask))


def batching(base: type, side: str | None, max_batch: int | None = None) -> type:
    limits = dataclasses.replace(base.limits, batch=BatchLimits(max_batch=max_batch, padding_side=side))
    return type(f"{base.__name__}_{side}_{max_batch}", (base,), {"limits": limits})


LAYOUTS = {  # (padding side, max batch): the layouts asked for, as (rows, padded)
    ("right", None): {(1, False), (3, True)},
    ("left", None): {(1, False), (3, True)},
    (None, None): {(1, False)},
    ("right", 2): {(1, False)},
    ("left", 3): {(1, False), (3, True)},
}
for (_side, _batch), _ in LAYOUTS.items():
    for _base in (Recording, PaddingVisible):
        _port = batching(_base, _side, _batch)
        globals()[_port.__name__] = _port


@pytest.mark.parametrize(("side", "max_batch"), LAYOUTS, ids=lambda value: str(value))
def test_each_padding_side_is_asked_the_layouts_it_decodes(side, max_batch, tiny_model):
    SEEN.clear()
    PAST.clear()
    rows = verify(
        tiny_model, VerifyOptions(port=f"{__name__}:Recording_{side}_{max_batch}", groups=("decode-masks",))
    ).rows
    assert set(SEEN) == LAYOUTS[side, max_batch] and rows and not any(row.failed for row in rows)
    assert min(PAST) >= 4  # the group's promise: past the furthest position too, 4 slots that must stay invisible
    padded = (3, True) in LAYOUTS[side, max_batch]
    faulty = verify(
        tiny_model, VerifyOptions(port=f"{__name__}:PaddingVisible_{side}_{max_batch}", groups=("decode-masks",))
    )
    failed = [row for row in faulty.rows if row.failed]
    assert bool(failed) == padded and all(row.stage == "masks decode" for row in failed), failed
