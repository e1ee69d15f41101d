"""Sample prompts built offline for the verification flow and the parity tests: seeded random text
ids and real image-processor outputs for synthetic images, with the image placeholder expansion
HF's processor performs (``boi``, ``num_soft_tokens`` image tokens, ``eoi``)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch
from PIL import Image
from transformers.models.gemma4.image_processing_pil_gemma4 import Gemma4ImageProcessorPil

BOS_TOKEN_ID = 2
_SPECIAL_ID_FIELDS = (
    "image_token_id",
    "boi_token_id",
    "eoi_token_id",
    "audio_token_id",
    "video_token_id",
    "boa_token_id",
    "eoa_token_index",
)


@dataclass(frozen=True)
class Prompt:
    """A padded batch as a processor returns it (``(B, S)`` ids and 0/1 mask), optionally with
    images: image ``i`` of a row fills ``[start, start + tokens)`` of ``image_slots[i]`` (counted from
    the row's first valid token), and ``pixel_values`` holds one entry per image, row by row, as HF's
    processor orders them. ``padding_side`` is ``"right"`` (valid tokens first, the default) or
    ``"left"`` (valid tokens last, as a processor with ``padding_side="left"`` returns them).

    This is what a port's ``prefill`` and ``generate`` receive: ``input_ids (B, S)`` int64,
    ``attention_mask (B, S)`` 0/1, ``pixel_values (N, P, 3 p^2)`` and ``image_position_ids (N, P, 2)``
    (``None`` for text; one entry per image, patches padded with position ``(-1, -1)``),
    ``image_slots``, ``filled_slots`` (per row and slot whether it holds an image; ``None``: all, when
    there are images), ``mm_token_type_ids`` (1 on image placeholders) and ``last_index``."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    pixel_values: torch.Tensor | None = None
    image_position_ids: torch.Tensor | None = None
    image_slots: tuple[tuple[int, int], ...] = ()
    filled_slots: tuple[tuple[bool, ...], ...] | None = None  # per row and slot (None: all, with images)
    padding_side: str = "right"

    @property
    def filled(self) -> torch.Tensor:
        """``(B, slots)`` bool: which slots of each row hold an image (the others hold text)."""
        rows = self.input_ids.shape[0]
        if self.pixel_values is None:
            return torch.zeros(rows, len(self.image_slots), dtype=torch.bool)
        if self.filled_slots is None:
            return torch.ones(rows, len(self.image_slots), dtype=torch.bool)
        return torch.tensor(self.filled_slots, dtype=torch.bool).view(rows, len(self.image_slots))

    @property
    def mm_token_type_ids(self) -> torch.Tensor:
        """``1`` on image placeholders, as HF's processor returns it."""
        types = torch.zeros_like(self.input_ids)
        for index, (start, count) in enumerate(self.image_slots):
            types[:, start : start + count] = self.filled[:, index, None].long()
        return types.gather(1, self._shift(-1)) if self.padding_side == "left" else types

    def _shift(self, direction: int) -> torch.Tensor:
        """``(B, S)`` gather index moving each row's valid tokens to the right end (``direction``
        ``-1``, from a right-padded layout) or back to the left end (``+1``)."""
        length = self.input_ids.shape[1]
        shift = length - self.attention_mask.sum(dim=1)
        return (torch.arange(length)[None, :] + direction * shift[:, None]) % length

    def left_padded(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``input_ids`` and ``attention_mask`` with every row's valid tokens moved to the right end,
        as a processor with ``padding_side="left"`` returns them."""
        if self.padding_side == "left":
            return self.input_ids, self.attention_mask
        index = self._shift(-1)
        return self.input_ids.gather(1, index), self.attention_mask.gather(1, index)

    def padded(self, side: str | None) -> Prompt:
        """This (right-padded) prompt laid out for ``side`` (``"left"``; ``"right"`` or ``None``: as it is)."""
        if side != "left" or self.padding_side == "left":
            return self
        ids, mask = self.left_padded()
        return replace(self, input_ids=ids, attention_mask=mask, padding_side="left")

    def right_aligned(self, values: torch.Tensor) -> torch.Tensor:
        """Per-position ``values (B, S, ...)`` of this prompt's layout with each row's valid positions
        first (the right-padded layout the checks compare in); unchanged for a right-padded prompt."""
        if self.padding_side != "left":
            return values
        index = self._shift(1).reshape(*index_shape(values))
        return values.gather(1, index.expand(-1, -1, *values.shape[2:]))

    def row(self, index: int) -> Prompt:
        """Row ``index`` alone, without its padding (what a batch-1 caller would pass)."""
        valid = self.attention_mask[index].bool()
        counts = self.filled.sum(dim=1)
        images = slice(int(counts[:index].sum()), int(counts[: index + 1].sum()))  # empty for a text row
        slots = tuple(
            slot for slot, filled in zip(self.image_slots, self.filled[index].tolist(), strict=True) if filled
        )
        return Prompt(
            input_ids=self.input_ids[index][valid][None],
            attention_mask=self.attention_mask[index][valid][None],
            pixel_values=self.pixel_values[images] if slots else None,
            image_position_ids=self.image_position_ids[images] if slots else None,
            image_slots=slots,
        )

    def hf_kwargs(self) -> dict[str, torch.Tensor]:
        """The keyword arguments an HF Gemma 4 forward or ``generate`` takes for this prompt."""
        kwargs = {"input_ids": self.input_ids, "attention_mask": self.attention_mask}
        if self.pixel_values is not None:
            kwargs.update(
                pixel_values=self.pixel_values,
                image_position_ids=self.image_position_ids,
                mm_token_type_ids=self.mm_token_type_ids,
            )
        return kwargs

    @property
    def last_index(self) -> torch.Tensor:
        """``(B,)`` index of each row's last valid token."""
        if self.padding_side == "left":
            return torch.full((self.input_ids.shape[0],), self.input_ids.shape[1] - 1)
        return self.attention_mask.sum(dim=1) - 1


def index_shape(values: torch.Tensor) -> tuple[int, ...]:
    """``(B, S, 1, ...)``: a ``(B, S)`` index viewed to broadcast over ``values``' trailing dims."""
    return (values.shape[0], values.shape[1], *([1] * (values.dim() - 2)))


def _text_ids(config, shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    vocab_size = config.get_text_config().vocab_size
    ids = torch.randint(3, vocab_size, shape, generator=generator)
    for field in _SPECIAL_ID_FIELDS:
        special = getattr(config, field, None)
        if special is not None:
            ids[ids == special] = 3
    return ids


def text_prompt(config, lengths: list[int], *, seed: int = 0) -> Prompt:
    """Rows of the given lengths, right-padded (pad id 0) to the longest; each starts with BOS."""
    generator = torch.Generator().manual_seed(seed)
    longest = max(lengths)
    ids = _text_ids(config, (len(lengths), longest), generator)
    ids[:, 0] = BOS_TOKEN_ID
    mask = (torch.arange(longest)[None, :] < torch.tensor(lengths)[:, None]).long()
    return Prompt(input_ids=torch.where(mask.bool(), ids, 0), attention_mask=mask)


def processed_images(config, sizes: list[tuple[int, int]], *, seed: int = 0, profile: int = 70) -> dict:
    """Seeded random RGB images of the given ``(height, width)`` sizes through HF's Gemma 4 PIL image
    processor at ``profile`` soft tokens: ``pixel_values (N, P, 3 p^2)``, ``image_position_ids
    (N, P, 2)`` and ``num_soft_tokens_per_image``."""
    rng = np.random.default_rng(seed)
    images = [Image.fromarray(rng.integers(0, 256, (*size, 3), dtype=np.uint8)) for size in sizes]
    vision = config.vision_config
    processor = Gemma4ImageProcessorPil(
        patch_size=vision.patch_size, pooling_kernel_size=vision.pooling_kernel_size, max_soft_tokens=profile
    )
    return processor(images, return_tensors="pt")


def image_prompt(
    config,
    text_after: list[int],
    *,
    text_before: int = 2,
    seed: int = 0,
    image_size: tuple[int, int] = (48, 48),
    with_image: list[bool] | list[tuple[bool, ...]] | None = None,
    then: tuple[tuple[int, tuple[int, int], int], ...] = (),
) -> Prompt:
    """Rows of ``text_before`` (>= 1: BOS) text tokens and a synthetic image of ``image_size``
    processed at 70 soft tokens, then for each ``(text, size, profile)`` of ``then`` that many text
    tokens and an image of that size processed at that profile, then ``text_after[b]`` text tokens
    for row ``b`` (so rows are ragged), right-padded. Each image is ``boi``, its soft tokens, ``eoi``;
    every row gets its own random images. ``with_image`` (default: every image of every row) says
    per row, for all its images or for each, whether it is there; where it is not, its slot holds
    text (``pixel_values`` holds one entry per image present, row by row, patches padded to the
    largest count as HF's processor pads them)."""
    images = [(text_before, image_size, 70), *then]
    with_image = [True] * len(text_after) if with_image is None else with_image
    present = [(flags,) * len(images) if isinstance(flags, bool) else tuple(flags) for flags in with_image]
    processed = []  # per slot, one image per row holding it (one at least, for its soft-token count)
    for index, (_, size, profile) in enumerate(images):
        count = max(sum(flags[index] for flags in present), 1)
        processed.append(processed_images(config, [size] * count, seed=seed + index, profile=profile))
    soft = [int(slot["num_soft_tokens_per_image"][0]) for slot in processed]
    slots, end = [], 0
    for (gap, _, _), tokens in zip(images, soft, strict=True):
        slots.append((end + gap + 1, tokens))  # text, then boi
        end += gap + tokens + 2
    generator = torch.Generator().manual_seed(seed)
    rows, pixels, positions, used = [], [], [], [0] * len(images)
    for after, flags in zip(text_after, present, strict=True):
        parts = []
        for index, ((gap, _, _), tokens, has_image) in enumerate(zip(images, soft, flags, strict=True)):
            parts.append(_text_ids(config, (gap,), generator))
            if not has_image:
                parts.append(_text_ids(config, (tokens + 2,), generator))
                continue
            parts.append(torch.tensor([config.boi_token_id] + [config.image_token_id] * tokens + [config.eoi_token_id]))
            pixels.append(processed[index]["pixel_values"][used[index]])
            positions.append(processed[index]["image_position_ids"][used[index]])
            used[index] += 1
        row = torch.cat((*parts, _text_ids(config, (after,), generator)))
        row[0] = BOS_TOKEN_ID
        rows.append(row)
    longest = max(len(row) for row in rows)
    ids = torch.zeros(len(rows), longest, dtype=torch.long)
    mask = torch.zeros(len(rows), longest, dtype=torch.long)
    for index, row in enumerate(rows):
        ids[index, : len(row)] = row
        mask[index, : len(row)] = 1
    return Prompt(
        input_ids=ids,
        attention_mask=mask,
        pixel_values=_stack_images(pixels, 0.0) if pixels else None,
        image_position_ids=_stack_images(positions, -1) if pixels else None,
        image_slots=tuple(slots),
        filled_slots=None if all(all(flags) for flags in present) else tuple(present),
    )


def _stack_images(images: list[torch.Tensor], padding: float) -> torch.Tensor:
    """Images of different patch counts ``(P_i, .)`` as one ``(N, max P_i, .)`` batch, the missing
    patches filled with ``padding`` (HF's processor pads a batch to its patch budget the same way)."""
    most = max(image.shape[0] for image in images)
    return torch.stack(
        [torch.cat((image, image.new_full((most - image.shape[0], image.shape[1]), padding))) for image in images]
    )
