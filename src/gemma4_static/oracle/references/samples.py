"""Sample prompts built offline for the verification flow and the parity tests: seeded random text
ids and real image-processor outputs for synthetic images, with the image placeholder expansion
HF's processor performs (``boi``, ``num_soft_tokens`` image tokens, ``eoi``)."""

from __future__ import annotations

import numpy as np
import torch
from PIL import Image

from ...ports.images import ImageProfile
from ...ports.prompt import Prompt

BOS_TOKEN_ID = 2
SPECIAL_ID_FIELDS = (
    "image_token_id",
    "boi_token_id",
    "eoi_token_id",
    "audio_token_id",
    "video_token_id",
    "boa_token_id",
    "eoa_token_index",
)


def special_ids(config) -> dict[str, int]:
    """Every special id of the model's config by field name: the image, video and audio placeholders,
    ``boi``/``eoi``, ``boa``/``eoa``, BOS, EOS (its first) and pad, where the vocabulary holds them."""
    text = config.get_text_config()
    eos = text.eos_token_id[0] if isinstance(text.eos_token_id, list) else text.eos_token_id
    found = {field: getattr(config, field, None) for field in SPECIAL_ID_FIELDS}
    found |= {"bos_token_id": text.bos_token_id, "eos_token_id": eos, "pad_token_id": text.pad_token_id}
    return {name: value for name, value in found.items() if value is not None and 0 <= value < text.vocab_size}


def _text_ids(config, shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    vocab_size = config.get_text_config().vocab_size
    ids = torch.randint(3, vocab_size, shape, generator=generator)
    for field in SPECIAL_ID_FIELDS:
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
    from transformers.models.gemma4.image_processing_pil_gemma4 import Gemma4ImageProcessorPil

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


def profile_prompt(config, profile: ImageProfile, text_after: int, *, seed: int = 0) -> Prompt:
    """One row in a port's fixed image ``profile``: BOS where the profile has one, text up to each
    image's ``boi``, the image (``boi``, ``profile.soft_tokens`` placeholders, ``eoi``) at its slot,
    then ``text_after`` text tokens; the images are seeded random ones of the profile's size through
    HF's image processor at the profile's budget. ``ValueError`` when the model's processor gives
    another soft-token count for that size and budget (the profile does not fit the model)."""
    count = len(profile.slots)
    images = processed_images(config, [profile.image_size] * count, seed=seed, profile=profile.budget)
    soft = images["num_soft_tokens_per_image"].tolist()
    if any(tokens != profile.soft_tokens for tokens in soft):
        raise ValueError(
            f"image profile {profile.name!r}: the model's image processor gives {soft[0]} soft tokens for "
            f"{profile.image_size} at a budget of {profile.budget}, not {profile.soft_tokens}"
        )
    generator = torch.Generator().manual_seed(seed)
    parts, end = [torch.tensor([BOS_TOKEN_ID])] if profile.bos else [], int(profile.bos)
    for slot in profile.slots:
        parts.append(_text_ids(config, (slot - 1 - end,), generator))
        image = [config.boi_token_id] + [config.image_token_id] * profile.soft_tokens + [config.eoi_token_id]
        parts.append(torch.tensor(image))
        end = slot + profile.soft_tokens + 1
    ids = torch.cat((*parts, _text_ids(config, (text_after,), generator)))[None]
    return Prompt(
        input_ids=ids,
        attention_mask=torch.ones_like(ids),
        pixel_values=images["pixel_values"],
        image_position_ids=images["image_position_ids"],
        image_slots=profile.image_slots,
    )


def _stack_images(images: list[torch.Tensor], padding: float) -> torch.Tensor:
    """Images of different patch counts ``(P_i, .)`` as one ``(N, max P_i, .)`` batch, the missing
    patches filled with ``padding`` (HF's processor pads a batch to its patch budget the same way)."""
    most = max(image.shape[0] for image in images)
    return torch.stack(
        [torch.cat((image, image.new_full((most - image.shape[0], image.shape[1]), padding))) for image in images]
    )
