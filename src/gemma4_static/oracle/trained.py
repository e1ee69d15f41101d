"""Fixture weights that look trained.

HF's random init leaves learned tensors at identity values: RMSNorm weights 1, the vision position
table all ones, clip bounds at +-inf (clipping never happens), standardization 0/1. On such weights
a whole class of bugs is invisible (a dropped norm weight, swapped x/y position embeddings, a
missing clamp). These functions give each of them seeded per-element values of a realistic spread;
clip bounds are calibrated on a sample image so that about 2% of the values are clamped.
"""

from __future__ import annotations

import torch
from torch import nn

CLIPPED_FRACTION = 0.01  # per side: the bounds sit at the 1% and 99% quantiles of what they see


def _uniform(tensor: torch.Tensor, low: float, high: float, generator: torch.Generator) -> None:
    tensor.copy_(torch.rand(tensor.shape, generator=generator) * (high - low) + low)


@torch.no_grad()
def make_vision_look_trained(
    model: nn.Module, pixel_values: torch.Tensor, image_position_ids: torch.Tensor, *, seed: int
) -> None:
    """Norm weights, q/k norms, position table, standardization and clip bounds of ``model``'s vision tower.

    q/k norm weights are ``head_dim ** -0.25`` times ``U(0.8, 1.2)``: attention runs with
    ``scaling = 1``, so unit norm weights would make scores of variance ``head_dim`` and the softmax
    nearly one-hot (see :func:`~gemma4_static.oracle.models.build_default_model`).
    """
    generator = torch.Generator().manual_seed(seed)
    tower = model.model.vision_tower
    for name, parameter in tower.named_parameters():
        if name.endswith(("q_norm.weight", "k_norm.weight")):
            _uniform(parameter, 0.8, 1.2, generator)
            parameter.mul_(tower.config.head_dim**-0.25)
        elif name.endswith("norm.weight"):
            _uniform(parameter, 0.6, 1.4, generator)
    table = tower.patch_embedder.position_embedding_table
    table.copy_(torch.randn(table.shape, generator=generator) * 0.5)
    if tower.config.standardize:
        tower.std_bias.copy_(torch.randn(tower.std_bias.shape, generator=generator) * 0.1)
        _uniform(tower.std_scale, 0.5, 1.5, generator)
    if tower.config.use_clipped_linears:
        _calibrate_clip_bounds(model, pixel_values, image_position_ids)


def _calibrate_clip_bounds(model: nn.Module, pixel_values: torch.Tensor, image_position_ids: torch.Tensor) -> None:
    """Set each clipped linear's input and output bounds to quantiles of what it sees on a sample image."""
    clipped = [module for module in model.model.vision_tower.modules() if getattr(module, "use_clipped_linears", False)]
    seen: dict[nn.Module, tuple[torch.Tensor, torch.Tensor]] = {}
    valid = (image_position_ids != -1).all(dim=-1)

    def record(module: nn.Module, args: tuple, output: torch.Tensor) -> None:
        seen[module] = (args[0][valid].flatten(), output[valid].flatten())

    hooks = [module.register_forward_hook(record) for module in clipped]
    try:
        model.model.get_image_features(pixel_values, image_position_ids)
    finally:
        for hook in hooks:
            hook.remove()
    for module in clipped:
        for values, low, high in zip(
            seen[module], ("input_min", "output_min"), ("input_max", "output_max"), strict=True
        ):
            quantiles = torch.quantile(values[:100_000], torch.tensor([CLIPPED_FRACTION, 1 - CLIPPED_FRACTION]))
            getattr(module, low).fill_(float(quantiles[0]))
            getattr(module, high).fill_(float(quantiles[1]))
