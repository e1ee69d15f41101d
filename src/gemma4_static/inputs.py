"""Static input building: right padding to ``max_seq``, image placeholders, validity, lengths."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from .checks import valid_token_mask


@dataclass(frozen=True)
class StaticLayout:
    """The fixed shapes a deployment is compiled for.

    ``visual_start_idx``/``num_visual_tokens`` describe the one image slot per row (both ``None``
    for text-only): soft tokens occupy ``[visual_start_idx, visual_start_idx + num_visual_tokens)``.
    """

    max_seq: int
    batch_size: int = 1
    visual_start_idx: int | None = None
    num_visual_tokens: int | None = None

    def __post_init__(self) -> None:
        for name in ("max_seq", "batch_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if (self.visual_start_idx is None) != (self.num_visual_tokens is None):
            raise ValueError(
                "visual_start_idx and num_visual_tokens must be given together, got "
                f"visual_start_idx={self.visual_start_idx!r}, num_visual_tokens={self.num_visual_tokens!r}"
            )
        if self.has_image_slot:
            start, count = self.visual_start_idx, self.num_visual_tokens
            if not isinstance(start, int) or not isinstance(count, int) or start < 0 or count < 1:
                raise ValueError(
                    f"visual_start_idx must be an int >= 0 and num_visual_tokens an int >= 1, got {start!r}, {count!r}"
                )
            if start + count > self.max_seq:
                raise ValueError(f"the image slot [{start}, {start + count}) does not fit in max_seq={self.max_seq}")

    @property
    def has_image_slot(self) -> bool:
        return self.num_visual_tokens is not None


@dataclass(frozen=True)
class StaticInputs:
    """Inputs at static shape ``(B, max_seq)``.

    ``input_ids``: LLM-side ids (image placeholders replaced by the pad id, right-padded with it);
    ``raw_ids``: the given ids right-padded with the pad id (placeholders kept); ``valid``: bool,
    ``True`` for prompt tokens; ``valid_length``: ``(B,)`` prompt lengths; ``mm_token_type_ids``:
    ``1`` on the image slot, ``0`` elsewhere.
    """

    input_ids: torch.Tensor
    raw_ids: torch.Tensor
    valid: torch.Tensor
    valid_length: torch.Tensor
    mm_token_type_ids: torch.Tensor


def build_static_inputs(
    input_ids: Any,
    attention_mask: Any,
    layout: StaticLayout,
    *,
    pad_token_id: int,
    vocab_size: int,
    image_token_id: int | None = None,
) -> StaticInputs:
    """Validate processor outputs ``(B, S)`` and lay them out at ``(B, layout.max_seq)``.

    Rows must be right-padded (valid tokens first); ``attention_mask=None`` means all valid.
    With an image slot, every row must hold exactly ``num_visual_tokens`` image placeholders at
    ``[visual_start_idx, visual_start_idx + num_visual_tokens)``; without one, none.
    """
    if not isinstance(input_ids, torch.Tensor) or input_ids.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"input_ids must be an int64/int32 torch.Tensor of shape (B, S), got {_describe(input_ids)}")
    if input_ids.dim() != 2 or input_ids.shape[1] == 0:
        raise ValueError(f"input_ids must have non-empty shape (B, S), got shape {tuple(input_ids.shape)}")
    batch, length = input_ids.shape
    if batch != layout.batch_size:
        raise ValueError(f"input_ids has batch size {batch}, but the layout's batch_size is {layout.batch_size}")
    valid = torch.ones_like(input_ids, dtype=torch.bool) if attention_mask is None else valid_token_mask(attention_mask)
    if valid.shape != input_ids.shape:
        raise ValueError(
            f"attention_mask must have input_ids' shape {tuple(input_ids.shape)}, got {tuple(valid.shape)}"
        )

    valid_length = valid.sum(dim=1)
    prefix = torch.arange(length)[None, :] < valid_length[:, None]
    not_right_padded = (valid != prefix).any(dim=1)
    if not_right_padded.any():
        rows = not_right_padded.nonzero().flatten().tolist()
        raise ValueError(
            f"attention_mask rows {rows} have left padding or holes; the static runtime is right-padded "
            "(valid tokens first, padding after)"
        )
    if (valid_length == 0).any():
        raise ValueError(f"attention_mask rows {(valid_length == 0).nonzero().flatten().tolist()} have no valid token")
    if int(valid_length.max()) > layout.max_seq:
        raise ValueError(f"prompt length {int(valid_length.max())} is longer than max_seq={layout.max_seq}")

    raw = torch.full((batch, layout.max_seq), pad_token_id, dtype=torch.long)
    copy_length = min(length, layout.max_seq)
    raw[:, :copy_length] = torch.where(valid[:, :copy_length], input_ids[:, :copy_length].long(), pad_token_id)
    static_valid = torch.zeros(batch, layout.max_seq, dtype=torch.bool)
    static_valid[:, :copy_length] = valid[:, :copy_length]

    is_image = (raw == image_token_id) & static_valid if image_token_id is not None else torch.zeros_like(static_valid)
    mm_token_type_ids = _check_image_slot(is_image, layout)
    out_of_vocab = static_valid & ~is_image & ((raw < 0) | (raw >= vocab_size))
    if out_of_vocab.any():
        bad = raw[out_of_vocab].unique().tolist()[:5]
        raise ValueError(f"input_ids holds ids outside the vocabulary [0, {vocab_size}): {bad}")
    return StaticInputs(
        input_ids=torch.where(is_image, pad_token_id, raw),
        raw_ids=raw,
        valid=static_valid,
        valid_length=valid_length,
        mm_token_type_ids=mm_token_type_ids,
    )


def _check_image_slot(is_image: torch.Tensor, layout: StaticLayout) -> torch.Tensor:
    """The ``(B, max_seq)`` token types (1 = image slot); errors when placeholders miss the slot."""
    slot = torch.zeros_like(is_image)
    if layout.has_image_slot:
        slot[:, layout.visual_start_idx : layout.visual_start_idx + layout.num_visual_tokens] = True
    if torch.equal(is_image, slot):
        return slot.long()
    if not layout.has_image_slot:
        raise ValueError(
            f"input_ids hold {int(is_image.sum())} image placeholder tokens, but the layout has no image slot "
            "(give visual_start_idx and num_visual_tokens)"
        )
    row = int((is_image != slot).any(dim=1).nonzero()[0])
    positions = is_image[row].nonzero().flatten().tolist()
    if len(positions) != layout.num_visual_tokens:
        raise ValueError(
            f"row {row} holds {len(positions)} image placeholder tokens, "
            f"expected num_visual_tokens={layout.num_visual_tokens}"
        )
    raise ValueError(
        f"row {row}'s image placeholders sit at {positions[0]}..{positions[-1]}, expected the contiguous slot "
        f"starting at visual_start_idx={layout.visual_start_idx}"
    )


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of dtype {value.dtype}"
    return type(value).__name__
