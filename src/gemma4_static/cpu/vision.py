"""CPU side of the vision stage, from the vision spec and ``image_position_ids`` alone.

A *profile* is a soft-token budget ``T`` of HF's Gemma 4 image processor; its patch budget is
``P = T * k**2`` (``k`` = ``pooling_kernel_size``), the static patch count of the vision stage.
For a batch of images ``(N, P, 2)`` of (x, y) patch positions (``(-1, -1)`` = padded patch) this
builds the encoder's key-padding mask, the axial 2-D RoPE and the pooling matrix, so the vision
stage is a fixed-shape graph (no data-dependent maxima, one-hots or masks inside it).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import torch

from ..spec import VisionSpec
from .checks import floating_dtype, mask_fill_value

VISION_PROFILES = (70, 140, 280, 560, 1120)  # the soft-token budgets HF's Gemma 4 image processor supports


def smallest_profile(tokens: int) -> int:
    """The smallest profile that holds ``tokens`` soft tokens."""
    for profile in VISION_PROFILES:
        if profile >= tokens:
            return profile
    raise ValueError(f"an image slot of {tokens} tokens exceeds the largest vision profile {VISION_PROFILES[-1]}")


@dataclass(frozen=True)
class VisionInputs:
    """What the vision stage takes besides the pixels, for ``N`` images of ``P`` patches:

    ``positions`` ``(N, P, 2)`` long, padded patches at ``(0, 0)``; ``padding`` ``(N, P)`` bool,
    ``True`` = padded patch; ``mask`` ``(N, 1, 1, P)`` additive key padding (``0.0`` = allowed; the
    encoder is bidirectional, so every query row is the same); ``cos``/``sin`` ``(N, P, head_dim)``
    in the H-H-W-W layout; ``pooling`` ``(N, T, P)`` fp32, ``1 / k**2`` from each valid patch to its
    soft token; ``soft_tokens`` ``(N,)`` valid soft tokens per image (they come first).
    """

    positions: torch.Tensor
    padding: torch.Tensor
    mask: torch.Tensor
    cos: torch.Tensor
    sin: torch.Tensor
    pooling: torch.Tensor
    soft_tokens: torch.Tensor

    def stage_args(self) -> tuple[torch.Tensor, ...]:
        """The vision stage's inputs after ``pixel_values``, in its ``forward`` order."""
        return self.positions, self.padding, self.mask, self.cos, self.sin, self.pooling


def vision_inverse_frequencies(spec: VisionSpec) -> torch.Tensor:
    """``(head_dim // 4,)`` fp32: ``theta ** -(2i / (head_dim / 2))``, the same for both axes (as HF)."""
    spatial = spec.head_dim // 2
    return 1.0 / (spec.rope_theta ** (torch.arange(0, spatial, 2, dtype=torch.float32) / spatial))


@lru_cache(maxsize=8)
def _axis_tables(spec: VisionSpec) -> tuple[torch.Tensor, torch.Tensor]:
    """fp32 cos/sin ``(position_embedding_size, head_dim // 4)`` of one axis, built once per spec."""
    angles = torch.arange(spec.position_embedding_size, dtype=torch.float32)[:, None] * vision_inverse_frequencies(spec)
    return angles.cos(), angles.sin()


def vision_rope(spec: VisionSpec, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin ``(N, P, head_dim)`` for long ``positions (N, P, 2)``: ``[x, x, y, y]`` frequency blocks,
    gathered from the fp32 axis tables and cast to ``dtype`` last."""
    parts = []
    for table in _axis_tables(spec):
        x = torch.nn.functional.embedding(positions[..., 0], table)
        y = torch.nn.functional.embedding(positions[..., 1], table)
        parts.append(torch.cat((x, x, y, y), dim=-1).to(dtype))
    return parts[0], parts[1]


def pooling_matrix(positions: torch.Tensor, padding: torch.Tensor, kernel: int, tokens: int) -> torch.Tensor:
    """``(N, T, P)`` fp32: valid patch ``(x, y)`` of an image ``W`` patches wide averages into soft token
    ``x // k + (W // k) * (y // k)`` with weight ``1 / k**2``; padded patches contribute nothing."""
    width = positions[..., 0].max(dim=-1, keepdim=True).values + 1
    index = positions[..., 0] // kernel + (width // kernel) * (positions[..., 1] // kernel)
    if (index[~padding] >= tokens).any():
        raise ValueError(
            f"image_position_ids describe an image of more than {tokens} soft tokens, beyond the vision profile"
        )
    weights = (index[:, None, :] == torch.arange(tokens)[None, :, None]) & ~padding[:, None, :]
    return weights.float() / kernel**2


def build_vision_inputs(
    spec: VisionSpec,
    image_position_ids: Any,
    *,
    profile: int,
    dtype: torch.dtype = torch.float32,
    mask_value: float | None = None,
) -> VisionInputs:
    """The vision stage's CPU-side inputs for ``image_position_ids (N, P, 2)`` at ``profile`` soft tokens.

    ``ValueError`` when the patch count is not the profile's patch budget, or positions are out of
    range or half padded.
    """
    dtype = floating_dtype(dtype)
    fill = mask_fill_value(mask_value, dtype)
    check_position_ids_type(image_position_ids)
    kernel = spec.pooling_kernel_size
    budget = profile * kernel**2
    if image_position_ids.dim() != 3 or image_position_ids.shape[1:] != (budget, 2):
        raise ValueError(
            f"image_position_ids has shape {tuple(image_position_ids.shape)}, but the vision profile of {profile} "
            f"soft tokens takes (N, {budget}, 2) ({profile} x {kernel}^2 patches); process the image with "
            f"max_soft_tokens={profile}"
        )
    ids = image_position_ids.long()
    padding = (ids == -1).all(dim=-1)
    if ((ids < 0) & ~padding[..., None]).any() or (ids >= spec.position_embedding_size).any():
        raise ValueError(
            "image_position_ids must be (x, y) in [0, position_embedding_size="
            f"{spec.position_embedding_size}) or (-1, -1) for padding"
        )
    positions = ids.clamp(min=0)
    cos, sin = vision_rope(spec, positions, dtype)
    mask = torch.where(padding, torch.tensor(fill, dtype=dtype), torch.zeros((), dtype=dtype))[:, None, None, :]
    return VisionInputs(
        positions=positions,
        padding=padding,
        mask=mask,
        cos=cos,
        sin=sin,
        pooling=pooling_matrix(positions, padding, kernel, profile),
        soft_tokens=(~padding).sum(dim=-1) // kernel**2,
    )


def fit_patches(
    pixel_values: torch.Tensor, image_position_ids: torch.Tensor, spec: VisionSpec, *, profile: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Images processed at any patch count ``(N, P, .)`` laid out at the patch budget of ``profile``
    (``profile * k**2`` patches): each image's valid patches first, then padding patches (zero
    pixels at position ``(-1, -1)``, as HF's processor pads to its own budget). The layout changes
    nothing HF computes: padded patches are masked out of the encoder and pooled into no soft token,
    and the stage is indifferent to patch order. ``ValueError`` naming both numbers when an image
    has more valid patches than the budget."""
    check_position_ids_type(image_position_ids)
    budget = profile * spec.pooling_kernel_size**2
    valid = (image_position_ids != -1).any(dim=-1)
    most = int(valid.sum(dim=-1).max())
    if most > budget:
        raise ValueError(
            f"an image has {most} patches ({most // spec.pooling_kernel_size**2} soft tokens), more than the "
            f"vision profile of {profile} soft tokens takes ({budget} patches); process it with max_soft_tokens <= "
            f"{profile} or choose a larger vision_profile"
        )
    images, width = pixel_values.shape[0], pixel_values.shape[2]
    pixels = torch.cat((pixel_values, pixel_values.new_zeros(images, budget, width)), dim=1)
    positions = torch.cat((image_position_ids, image_position_ids.new_full((images, budget, 2), -1)), dim=1)
    padding = torch.cat((~valid, valid.new_ones(images, budget)), dim=1)
    order = torch.argsort(padding.int(), dim=-1, stable=True)[:, :budget, None]  # valid patches first
    return pixels.gather(1, order.expand(-1, -1, width)), positions.gather(1, order.expand(-1, -1, 2))


def check_position_ids_type(image_position_ids: Any) -> None:
    if not isinstance(image_position_ids, torch.Tensor) or image_position_ids.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"image_position_ids must be an integer torch.Tensor (N, P, 2), got {image_position_ids!r}")
