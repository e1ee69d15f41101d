"""Padding layouts and sequence lengths exercised by the verification flow and the parity tests."""

from __future__ import annotations

import torch

PADDINGS = ("none", "right", "left", "holes")
LENGTHS = ("below", "equal", "above")


def sequence_length(kind: str, window: int) -> int:
    """A length below, equal to or above ``window`` (above: past two windows, so the window slides)."""
    return {"below": max(1, window - 2), "equal": window, "above": 2 * window + 3}[kind]


def valid_mask(padding: str, batch: int, length: int) -> torch.Tensor:
    """``(batch, length)`` bool valid-token mask; row ``b`` drops ``b + 1`` tokens (ragged rows).

    ``right``/``left`` pad at the end/start; ``holes`` drops tokens in the middle. Every row keeps
    at least one valid token.
    """
    mask = torch.ones(batch, length, dtype=torch.bool)
    if padding == "none":
        return mask
    for row in range(batch):
        drop = min(row + 1, length - 1)
        if drop == 0:
            continue
        if padding == "right":
            mask[row, length - drop :] = False
        elif padding == "left":
            mask[row, :drop] = False
        else:
            start = (length - drop) // 2
            mask[row, start : start + drop] = False
    return mask
