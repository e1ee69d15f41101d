"""Static inputs: the layout, each row's tokens first and padded to ``max_seq``, image placeholders, validity, lengths,
and the checks of what a caller feeds the runtime (decode ids, images)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from .cache import SLIDING_CACHES
from .checks import positive_int, valid_token_mask
from .vision import VISION_PROFILES


@dataclass(frozen=True)
class StaticLayout:
    """The fixed shapes a deployment is compiled for.

    ``visual_start_idx``/``num_visual_tokens`` describe the one image slot per row (both ``None``
    for text-only): soft tokens occupy ``[visual_start_idx, visual_start_idx + num_visual_tokens)``.
    ``prefill_chunk`` (``None``: single shot) must tile ``max_seq`` and keep the image slot inside
    one chunk (its tokens attend to each other bidirectionally, which a chunk cannot do across a
    later chunk). ``sliding_cache`` is the KV layout of sliding layers (``"ring"``: ``sliding_window``
    slots; ``"full"``: ``max_seq``). ``vision_profile`` is the soft-token budget the images are processed at (one of
    :data:`VISION_PROFILES`, at least ``num_visual_tokens``; ``None`` without an image slot).
    """

    max_seq: int
    batch_size: int = 1
    visual_start_idx: int | None = None
    num_visual_tokens: int | None = None
    prefill_chunk: int | None = None
    vision_profile: int | None = None
    sliding_cache: str = "ring"

    def __post_init__(self) -> None:
        positive_int(self.max_seq, "max_seq")
        positive_int(self.batch_size, "batch_size")
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
                raise ValueError(
                    f"visual_start_idx={start} and num_visual_tokens={count}: the image slot "
                    f"[{start}, {start + count}) does not fit in max_seq={self.max_seq}"
                )
        if self.prefill_chunk is not None:
            self._check_chunk()
        if self.sliding_cache not in SLIDING_CACHES:
            raise ValueError(f"sliding_cache must be one of {SLIDING_CACHES}, got {self.sliding_cache!r}")
        if self.has_image_slot != (self.vision_profile is not None):
            raise ValueError("vision_profile is given exactly when the layout has an image slot")
        if self.has_image_slot and (
            self.vision_profile not in VISION_PROFILES or self.vision_profile < self.num_visual_tokens
        ):
            raise ValueError(
                f"vision_profile must be one of {VISION_PROFILES} and at least num_visual_tokens="
                f"{self.num_visual_tokens}, got {self.vision_profile!r}"
            )

    def _check_chunk(self) -> None:
        chunk = self.prefill_chunk
        if not isinstance(chunk, int) or isinstance(chunk, bool) or chunk < 1:
            raise ValueError(f"prefill_chunk must be a positive int or None, got {chunk!r}")
        if self.max_seq % chunk:
            raise ValueError(f"prefill_chunk={chunk} must divide max_seq={self.max_seq}")
        if self.has_image_slot:
            first, last = self.visual_start_idx, self.visual_start_idx + self.num_visual_tokens - 1
            if first // chunk != last // chunk:
                raise ValueError(
                    f"the image slot [{first}, {last + 1}) crosses a boundary of prefill_chunk={chunk}; "
                    "choose visual_start_idx and prefill_chunk so that the image lies inside one chunk"
                )

    @property
    def has_image_slot(self) -> bool:
        return self.num_visual_tokens is not None


@dataclass(frozen=True)
class StaticInputs:
    """Inputs at static shape ``(B, max_seq)``.

    ``input_ids``: LLM-side ids (multimodal placeholders replaced by the pad id, right-padded with it);
    ``raw_ids``: the given valid ids first, right-padded with the pad id (placeholders kept); ``valid``: bool,
    ``True`` for prompt tokens; ``valid_length``: ``(B,)`` prompt lengths; ``mm_token_type_ids``:
    ``1`` on the image slot of the rows that hold an image, ``0`` elsewhere.
    """

    input_ids: torch.Tensor
    raw_ids: torch.Tensor
    valid: torch.Tensor
    valid_length: torch.Tensor
    mm_token_type_ids: torch.Tensor

    @property
    def image_rows(self) -> torch.Tensor:
        """``(B,)`` bool: the rows whose image slot holds an image (the others hold text there)."""
        return self.mm_token_type_ids.bool().any(dim=1)


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
    image slot, a row holds either exactly ``num_visual_tokens`` image placeholders at
    ``[visual_start_idx, visual_start_idx + num_visual_tokens)`` counted from its first valid
    token, or none (text in the slot); without one, none. Every
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
    mm_token_type_ids = _check_image_slot(is_image, layout)
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
        mm_token_type_ids=mm_token_type_ids,
    )


def _check_image_slot(is_image: torch.Tensor, layout: StaticLayout) -> torch.Tensor:
    """The ``(B, max_seq)`` token types (1 = an image fills the row's slot); a row either fills the
    slot with image placeholders or holds none (its slot is text); errors when placeholders miss it."""
    slot = torch.zeros_like(is_image)
    if layout.has_image_slot:
        slot[:, layout.visual_start_idx : layout.visual_start_idx + layout.num_visual_tokens] = True
    filled = slot & is_image.any(dim=1, keepdim=True)
    if torch.equal(is_image, filled):
        return filled.long()
    if not layout.has_image_slot:
        raise ValueError(
            f"input_ids hold {int(is_image.sum())} image placeholder tokens, but the layout has no image slot "
            "(give visual_start_idx and num_visual_tokens)"
        )
    row = int((is_image != filled).any(dim=1).nonzero()[0])
    positions = is_image[row].nonzero().flatten().tolist()
    if len(positions) != layout.num_visual_tokens:
        raise ValueError(
            f"row {row} holds {len(positions)} image placeholder tokens, "
            f"expected num_visual_tokens={layout.num_visual_tokens} (or none: the slot then holds text)"
        )
    raise ValueError(
        f"row {row}'s image placeholders sit at {positions[0]}..{positions[-1]}, expected the contiguous slot "
        f"starting at visual_start_idx={layout.visual_start_idx}"
    )


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
