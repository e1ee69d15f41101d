"""Porting bugs of the vision tower (see :mod:`.catalogue`): the 2-D RoPE axes, the x/y position
tables, the pooling order and the clipped linears, the places where a port of Gemma 4's vision
encoder from another framework's layout goes wrong, and the order images are handed to slots."""

from __future__ import annotations

import torch

from ...cpu import inputs as cpu_inputs
from ...cpu import vision as cpu_vision
from ...npu import vision as npu_vision
from .faults import Fault, after_init, setting, with_argument


def _flip_xy(positions: torch.Tensor) -> torch.Tensor:
    return positions.flip(-1)


def _slot_by_slot(original):
    """``StaticInputs.image_index`` counting the images column by column (every row's first image,
    then every row's second) instead of row by row."""

    def image_index(inputs: cpu_inputs.StaticInputs) -> torch.Tensor:
        filled = inputs.filled_slots
        order = filled.T.flatten().long().cumsum(0).view(filled.shape[1], -1).T - 1
        return torch.where(filled, order, -1)

    return image_index


VISION_FAULTS: tuple[Fault, ...] = (
    Fault(
        "vision-rope-axes-swapped",
        "the 2-D vision RoPE rotates y where x belongs",
        ((cpu_vision, "vision_rope", with_argument(1, _flip_xy)),),
        needs_vision=True,
    ),
    Fault(
        "vision-position-table-swapped",
        "the x and y vision position-embedding tables are swapped",
        ((npu_vision.VisionEncoder, "embed_patches", with_argument(2, _flip_xy)),),
        needs_vision=True,
    ),
    Fault(
        "vision-pooling-transposed",
        "patches pooled column-major (the pooling width read from the wrong axis)",
        ((cpu_vision, "pooling_matrix", with_argument(0, _flip_xy)),),
        needs_vision=True,
    ),
    Fault(
        "vision-clamps-dropped",
        "the vision tower's clipped linears run without their clamps",
        (after_init(npu_vision.ClippedProjection, setting("clipped", lambda layer: False)),),
        needs_vision=True,
    ),
    Fault(
        "images-slot-by-slot",
        "a prompt's images handed to the slots slot by slot instead of row by row (HF's processor order)",
        ((cpu_inputs.StaticInputs, "image_index", _slot_by_slot),),
        needs_vision=True,
        raises="images of different sizes handed to the wrong slots: the runtime's own check of each slot's soft "
        "tokens refuses them (a ValueError naming the slot)",
    ),
)
