"""Sample prompts built offline for the verification flow and the parity tests: seeded random text
ids and real image-processor outputs for synthetic images, with the image placeholder expansion
HF's processor performs (``boi``, ``num_soft_tokens`` image tokens, ``eoi``)."""

from __future__ import annotations

from dataclasses import dataclass

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
    """A right-padded batch as a processor returns it (``(B, S)`` ids and 0/1 mask), optionally with
    one image per row whose placeholders fill ``[visual_start_idx, visual_start_idx + num_visual_tokens)``."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    pixel_values: torch.Tensor | None = None
    image_position_ids: torch.Tensor | None = None
    visual_start_idx: int | None = None
    num_visual_tokens: int | None = None
    image_rows: tuple[bool, ...] | None = None  # which rows hold an image (None: every row, with images)

    @property
    def rows_with_image(self) -> torch.Tensor:
        """``(B,)`` bool: the rows whose slot holds an image (one entry of ``pixel_values`` each, in order)."""
        if self.pixel_values is None:
            return torch.zeros(self.input_ids.shape[0], dtype=torch.bool)
        if self.image_rows is None:
            return torch.ones(self.input_ids.shape[0], dtype=torch.bool)
        return torch.tensor(self.image_rows)

    @property
    def mm_token_type_ids(self) -> torch.Tensor:
        """``1`` on image placeholders, as HF's processor returns it."""
        types = torch.zeros_like(self.input_ids)
        if self.visual_start_idx is not None:
            types[:, self.visual_start_idx : self.visual_start_idx + self.num_visual_tokens] = 1
        return types * self.rows_with_image[:, None]

    @property
    def image_slot(self) -> dict[str, int | None]:
        """The runtime layout's image slot for this prompt, as ``StaticGemma4Runtime`` keywords."""
        return {"visual_start_idx": self.visual_start_idx, "num_visual_tokens": self.num_visual_tokens}

    def left_padded(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``input_ids`` and ``attention_mask`` with every row's valid tokens moved to the right end,
        as a processor with ``padding_side="left"`` returns them."""
        length = self.input_ids.shape[1]
        shift = length - self.attention_mask.sum(dim=1)
        index = (torch.arange(length)[None, :] - shift[:, None]) % length
        return self.input_ids.gather(1, index), self.attention_mask.gather(1, index)

    def row(self, index: int) -> Prompt:
        """Row ``index`` alone, without its padding (what a batch-1 caller would pass)."""
        length = int(self.attention_mask[index].sum())
        rows = self.rows_with_image
        image = slice(int(rows[:index].sum()), int(rows[: index + 1].sum()))  # empty for a text row
        return Prompt(
            input_ids=self.input_ids[index : index + 1, :length],
            attention_mask=self.attention_mask[index : index + 1, :length],
            pixel_values=self.pixel_values[image] if rows[index] else None,
            image_position_ids=self.image_position_ids[image] if rows[index] else None,
            visual_start_idx=self.visual_start_idx if rows[index] else None,
            num_visual_tokens=self.num_visual_tokens if rows[index] else None,
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
        return self.attention_mask.sum(dim=1) - 1


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
    with_image: list[bool] | None = None,
) -> Prompt:
    """One synthetic image of ``image_size`` per row after ``text_before`` text tokens, then
    ``text_after[b]`` text tokens for row ``b`` (so rows are ragged), right-padded. ``with_image``
    (default: every row) leaves text where a row's image would be (``pixel_values`` holds one entry
    per image, in row order)."""
    with_image = [True] * len(text_after) if with_image is None else with_image
    images = sum(with_image)
    processed = processed_images(config, [image_size] * max(images, 1), seed=seed)  # one at least, for its size
    soft_tokens = int(processed["num_soft_tokens_per_image"][0])
    start = text_before + 1  # BOS/text, then boi
    generator = torch.Generator().manual_seed(seed)
    rows = []
    for after, has_image in zip(text_after, with_image, strict=True):
        before = _text_ids(config, (text_before,), generator)
        before[0] = BOS_TOKEN_ID
        image = torch.tensor([config.boi_token_id] + [config.image_token_id] * soft_tokens + [config.eoi_token_id])
        image = image if has_image else _text_ids(config, (soft_tokens + 2,), generator)
        rows.append(torch.cat((before, image, _text_ids(config, (after,), generator))))
    longest = max(len(row) for row in rows)
    ids = torch.zeros(len(rows), longest, dtype=torch.long)
    mask = torch.zeros(len(rows), longest, dtype=torch.long)
    for index, row in enumerate(rows):
        ids[index, : len(row)] = row
        mask[index, : len(row)] = 1
    return Prompt(
        input_ids=ids,
        attention_mask=mask,
        pixel_values=processed["pixel_values"][:images] if images else None,
        image_position_ids=processed["image_position_ids"][:images] if images else None,
        visual_start_idx=start,
        num_visual_tokens=soft_tokens,
        image_rows=None if all(with_image) else tuple(with_image),
    )
