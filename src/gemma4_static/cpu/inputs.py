"""Static inputs: each row's tokens first and padded to ``max_seq``, image placeholders, validity,
lengths, and the checks of what a caller feeds the runtime (decode ids, EOS ids)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from .checks import valid_token_mask
from .layout import StaticLayout


@dataclass(frozen=True)
class StaticInputs:
    """Inputs at static shape ``(B, max_seq)``.

    ``input_ids``: LLM-side ids (multimodal placeholders replaced by the pad id, right-padded with it);
    ``raw_ids``: the given valid ids first, right-padded with the pad id (placeholders kept); ``valid``: bool,
    ``True`` for prompt tokens; ``valid_length``: ``(B,)`` prompt lengths; ``mm_token_type_ids``:
    ``1`` on the image slots a row fills with an image, ``0`` elsewhere; ``filled_slots``: ``(B,
    slots)`` bool, which image slots of each row hold an image (the others hold text).
    """

    input_ids: torch.Tensor
    raw_ids: torch.Tensor
    valid: torch.Tensor
    valid_length: torch.Tensor
    mm_token_type_ids: torch.Tensor
    filled_slots: torch.Tensor

    @property
    def image_count(self) -> int:
        """How many images the prompt holds (one per filled slot)."""
        return int(self.filled_slots.sum())

    def image_index(self) -> torch.Tensor:
        """``(B, slots)`` long: which of the caller's images fills each (row, slot), in HF's order
        (row by row, slot by slot); ``-1`` where the slot holds text."""
        order = self.filled_slots.flatten().long().cumsum(0).view_as(self.filled_slots) - 1
        return torch.where(self.filled_slots, order, -1)


def build_static_inputs(
    input_ids: Any,
    attention_mask: Any,
    layout: StaticLayout,
    *,
    pad_token_id: int,
    vocab_size: int,
    image_token_id: int | None = None,
    placeholder_token_ids: tuple[int, ...] = (),
) -> StaticInputs:
    """Validate processor outputs ``(B, S)`` and lay them out at ``(B, layout.max_seq)``.

    Rows may be right- or left-padded (valid tokens contiguous; holes are an error);
    ``attention_mask=None`` means all valid. The static layout puts every row's valid tokens first
    (a left-padded row moves to the front: positions count from a row's first valid token, as HF's
    generate does, and RoPE and the masks depend only on distances between valid tokens). With an
    each image slot ``(start, tokens)``, a row holds either exactly ``tokens`` image placeholders at
    ``[start, start + tokens)`` counted from its first valid token, or none (text in the slot);
    outside the slots, none. Every
    ``placeholder_token_ids`` entry (image, video, audio) becomes the pad id on the LLM side,
    wherever it stands, as HF does.
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
    if (valid_length == 0).any():
        raise ValueError(f"attention_mask rows {(valid_length == 0).nonzero().flatten().tolist()} have no valid token")
    first = valid.int().argmax(dim=1)  # each row's first valid token: 0 when right-padded
    columns = torch.arange(length)[None, :]
    contiguous = valid == ((columns >= first[:, None]) & (columns < (first + valid_length)[:, None]))
    if not contiguous.all():
        rows = (~contiguous).any(dim=1).nonzero().flatten().tolist()
        raise ValueError(
            f"attention_mask rows {rows} have holes (padding between valid tokens); a row may be padded on the "
            "left or the right only: a hole changes the distances between the tokens around it (RoPE, the "
            "sliding window), which no static layout can reproduce"
        )
    if int(valid_length.max()) > layout.max_seq:
        raise ValueError(f"prompt length {int(valid_length.max())} is longer than max_seq={layout.max_seq}")

    # every row's valid tokens first (a left-padded row moves to the front), the pad id after them
    static_valid = torch.arange(layout.max_seq)[None, :] < valid_length[:, None]
    source = (first[:, None] + torch.arange(layout.max_seq)[None, :]).clamp(max=length - 1)
    raw = torch.where(static_valid, input_ids.long().gather(1, source), pad_token_id)

    is_image = (raw == image_token_id) & static_valid if image_token_id is not None else torch.zeros_like(static_valid)
    filled_slots = _check_image_slots(is_image, layout)
    is_placeholder = torch.isin(raw, torch.tensor(placeholder_token_ids, dtype=torch.long)) | is_image
    out_of_vocab = static_valid & ~is_placeholder & ((raw < 0) | (raw >= vocab_size))
    if out_of_vocab.any():
        bad = raw[out_of_vocab].unique().tolist()[:5]
        raise ValueError(f"input_ids holds ids outside the vocabulary [0, {vocab_size}): {bad}")
    return StaticInputs(
        input_ids=llm_ids(raw, placeholder_token_ids, pad_token_id),
        raw_ids=raw,
        valid=static_valid,
        valid_length=valid_length,
        mm_token_type_ids=is_image.long(),
        filled_slots=filled_slots,
    )


def _check_image_slots(is_image: torch.Tensor, layout: StaticLayout) -> torch.Tensor:
    """``(B, slots)`` bool, which slots each row fills with image placeholders ``is_image (B, max_seq)``;
    a slot holds all its placeholders or none (text), and no placeholder stands outside the slots."""
    filled = torch.zeros(is_image.shape[0], len(layout.image_slots), dtype=torch.bool)
    covered = torch.zeros_like(is_image)
    for index, (start, count) in enumerate(layout.image_slots):
        held = is_image[:, start : start + count].sum(dim=1)
        partial = (held != 0) & (held != count)
        if partial.any():
            row = int(partial.nonzero()[0])
            raise ValueError(
                f"row {row} holds {int(held[row])} image placeholder tokens in the image slot [{start}, "
                f"{start + count}), expected {count} (or none: the slot then holds text)"
            )
        filled[:, index] = held == count
        covered[:, start : start + count] = True
    stray = is_image & ~covered
    if stray.any():
        if not layout.has_image_slot:
            raise ValueError(
                f"input_ids hold {int(is_image.sum())} image placeholder tokens, but the layout has no image slot "
                "(give image_slots)"
            )
        row = int(stray.any(dim=1).nonzero()[0])
        positions = stray[row].nonzero().flatten().tolist()
        raise ValueError(
            f"row {row} holds image placeholders at {positions[0]}..{positions[-1]} outside the image slots "
            f"{[(start, start + count) for start, count in layout.image_slots]} (as [start, end))"
        )
    return filled


def check_next_ids(next_ids: Any, *, batch_size: int, vocab_size: int) -> torch.Tensor:
    """Decode input ``(B, 1)`` integer ids inside the vocabulary, as long."""
    if not isinstance(next_ids, torch.Tensor) or next_ids.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"next_ids must be an integer torch.Tensor of shape (B, 1), got {next_ids!r}")
    if next_ids.shape != (batch_size, 1):
        raise ValueError(f"next_ids must have shape (batch_size, 1) = ({batch_size}, 1), got {tuple(next_ids.shape)}")
    if ((next_ids < 0) | (next_ids >= vocab_size)).any():
        raise ValueError(f"next_ids hold ids outside the vocabulary [0, {vocab_size}): {next_ids.flatten().tolist()}")
    return next_ids.long()


def check_eos_token_ids(eos_token_id: Any, *, vocab_size: int) -> torch.Tensor:
    """``None`` (never stop early), an int or a list/tuple of ints, each inside the vocabulary
    ``[0, vocab_size)`` (an id outside it could never be generated), as a ``(E,)`` long tensor."""
    ids = [] if eos_token_id is None else [eos_token_id] if isinstance(eos_token_id, int) else eos_token_id
    if not isinstance(ids, list | tuple) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise TypeError(f"eos_token_id must be None, an int or a list of ints, got {eos_token_id!r}")
    outside = [i for i in ids if not 0 <= i < vocab_size]
    if outside:
        raise ValueError(f"eos_token_id must be inside the vocabulary [0, {vocab_size}), got {eos_token_id!r}")
    return torch.tensor(ids, dtype=torch.long)


def llm_ids(ids: torch.Tensor, placeholder_token_ids: tuple[int, ...], pad_token_id: int) -> torch.Tensor:
    """``ids`` with every multimodal placeholder id replaced by the pad id (HF's ``llm_input_ids``)."""
    return torch.where(torch.isin(ids, torch.tensor(placeholder_token_ids, dtype=ids.dtype)), pad_token_id, ids)


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of dtype {value.dtype}"
    return type(value).__name__
