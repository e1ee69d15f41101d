"""The images a prompt brings, on the CPU side: checked against the layout's image slots and
placed, slot by slot, into the vision stage calls that fill them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ..spec import VisionSpec
from .layout import StaticLayout
from .vision import VisionInputs, build_vision_inputs, check_position_ids_type, fit_patches


def check_image_inputs(
    pixel_values: Any,
    image_position_ids: Any,
    layout: StaticLayout,
    *,
    vision: VisionSpec | None,
    image_count: int,
) -> bool:
    """Whether images are given; ``ValueError`` unless images, model (``vision`` is ``None`` without a
    vision tower), the layout's image slots and the ``image_count`` slots the prompt fills with
    placeholders agree: one image per filled slot, row by row, as HF's processor returns them."""
    if pixel_values is None:
        if image_count:
            raise ValueError(
                f"{image_count} image slots hold image placeholders: pixel_values and image_position_ids are required"
            )
        if image_position_ids is not None:
            raise ValueError("image_position_ids given without pixel_values")
        return False
    if vision is None:
        raise ValueError("pixel_values given, but this model has no vision tower (text-only Gemma 4)")
    if not layout.has_image_slot:
        raise ValueError("pixel_values given, but the layout has no image slot (image_slots)")
    if image_position_ids is None:
        raise ValueError("pixel_values need image_position_ids (from the Gemma 4 image processor)")
    check_position_ids_type(image_position_ids)
    if (
        not isinstance(pixel_values, torch.Tensor)
        or pixel_values.dim() != 3
        or pixel_values.shape[0] != image_count
        or pixel_values.shape[2] != 3 * vision.patch_size**2
        or image_position_ids.shape[:2] != pixel_values.shape[:2]
    ):
        raise ValueError(
            f"pixel_values must be (images={image_count}: one per image slot holding placeholders, patches, "
            f"3 * patch_size^2={3 * vision.patch_size**2}) with image_position_ids (images, patches, 2), "
            f"got {_shape(pixel_values)} and {_shape(image_position_ids)}"
        )
    return True


@dataclass(frozen=True)
class SlotImages:
    """One image slot's vision stage call: ``pixel_values (B, P, .)`` at the slot's profile (one
    image per row; a row whose slot holds text borrows another row's, dropped at fusion), its
    CPU-side ``inputs``, and ``filled (B,)`` bool, the rows whose slot holds an image."""

    slot: int
    pixel_values: torch.Tensor
    inputs: VisionInputs
    filled: torch.Tensor


def slot_images(
    pixel_values: torch.Tensor,
    image_position_ids: torch.Tensor,
    image_index: torch.Tensor,
    spec: VisionSpec,
    layout: StaticLayout,
    dtype: torch.dtype,
    mask_value: float | None,
) -> list[SlotImages]:
    """The vision stage calls of the slots that some row fills: the images ``(N, ...)`` are placed by
    ``image_index (B, slots)`` (``-1`` = text), each fitted to its slot's profile (:func:`fit_patches`)
    with its CPU-side inputs (:func:`build_vision_inputs`); ``ValueError`` unless every image's soft
    tokens fill its slot."""
    calls = []
    for slot, ((_, count), profile) in enumerate(zip(layout.image_slots, layout.vision_profiles, strict=True)):
        index, filled = image_index[:, slot], image_index[:, slot] >= 0
        if not filled.any():
            continue
        index = torch.where(filled, index, index[filled][0])
        pixels, positions = fit_patches(pixel_values[index], image_position_ids[index], spec, profile=profile)
        inputs = build_vision_inputs(spec, positions, profile=profile, dtype=dtype, mask_value=mask_value)
        if (inputs.soft_tokens[filled] != count).any():
            raise ValueError(
                f"the images of image slot {slot} give {inputs.soft_tokens[filled].tolist()} soft tokens, "
                f"but the slot holds {count}"
            )
        calls.append(SlotImages(slot, pixels, inputs, filled))
    return calls


def _shape(value: Any) -> Any:
    return tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
