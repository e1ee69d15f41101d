"""Fixture weights that look trained.

HF's random init leaves learned tensors at identity values: RMSNorm weights 1, ``layer_scalar`` 1,
the vision position table all ones, clip bounds at +-inf (clipping never happens), standardization
0/1, and logits far below the final softcap. On such weights a whole class of bugs is invisible (a
dropped norm weight or layer scalar, q norm applied after RoPE, swapped x/y position embeddings, a
missing clamp or softcap). These functions give each of them seeded per-element values of a
realistic spread; clip bounds are calibrated on a sample image so that about 2% of the values are
clamped, and the final norm so that pre-cap logits reach :data:`PRE_CAP_LOGIT_RATIO` x the softcap.
"""

from __future__ import annotations

import re

import torch
from torch import nn

from ...spec import text_module

CLIPPED_FRACTION = 0.01  # per side: the bounds sit at the 1% and 99% quantiles of what they see
# The fixtures' largest pre-cap logit on a sample prompt is 1.5x the cap of 30 (45), so a missing or
# misplaced softcap moves the top logits by about 20. Not more: random weights give no token a
# confident lead, and at 3x (real E2B reaches about 4x) every row's top logits sit where tanh is
# flat (slope 0.01), squeezing top-2 gaps below what bf16 can resolve: no bf16 top-1 decision on
# any sample row or decode step was decided under the token rule (:mod:`..numerics.metrics`); at 1.5x (slope
# 0.18) some are.
PRE_CAP_LOGIT_RATIO = 1.5
NORM_WEIGHT = re.compile(r"norm(_\d)?\.weight$")  # also the MoE block's pre/post norms (..._layernorm_2)


def _uniform(tensor: torch.Tensor, low: float, high: float, generator: torch.Generator) -> None:
    tensor.copy_(torch.rand(tensor.shape, generator=generator) * (high - low) + low)


def _qk_norm_weight(norm: nn.Module, head_dim: int, generator: torch.Generator) -> None:
    """``head_dim ** -0.25 x U(0.8, 1.2)``: attention runs with ``scaling = 1``, so unit q/k norm
    weights would give scores of variance ``head_dim`` and a nearly one-hot softmax; a 35-layer
    model then amplifies fp32 rounding about tenfold every five layers (HF's own fp32 forward
    drifts from fp64 by 6 at layer 34). With these weights scores have about unit variance and HF's
    fp32 forward stays within 1e-4 of fp64 through all 35 layers."""
    _uniform(norm.weight, 0.8, 1.2, generator)
    norm.weight.mul_(head_dim**-0.25)


def _make_router_decide(router: nn.Module, generator: torch.Generator) -> None:
    """Router ``scale`` ``U(0.6, 1.4)``, ``per_expert_scale`` ``U(0.5, 1.5)`` and projection rows of
    std 2: the router's input has unit norm, so its scores have std about 2 and each token's top-k
    is decided by clear margins (HF's init gives std 0.02 and near-uniform routing, where the choice
    rests on the last bits). Experts 0 and 1 share one row: they tie exactly on every token, so
    whenever the top-k boundary falls between them HF's tie order (``torch.topk``'s) is exercised."""
    _uniform(router.scale, 0.6, 1.4, generator)
    _uniform(router.per_expert_scale, 0.5, 1.5, generator)
    router.proj.weight.copy_(torch.randn(router.proj.weight.shape, generator=generator) * 2.0)
    router.proj.weight[1] = router.proj.weight[0]


@torch.no_grad()
def make_text_look_trained(model: nn.Module, sample_ids: torch.Tensor, *, seed: int) -> None:
    """Norm weights ``U(0.6, 1.4)``, q/k norms (:func:`_qk_norm_weight`), ``layer_scalar``
    ``U(0.7, 1.3)`` (the residual stream keeps its scale over 35 layers) of ``model``'s text decoder,
    routers of MoE blocks (:func:`_make_router_decide`); then, with a final softcap, the final norm
    is scaled so that the largest pre-cap logit on ``sample_ids (B, S)`` is
    :data:`PRE_CAP_LOGIT_RATIO` x ``final_logit_softcapping``."""
    generator = torch.Generator().manual_seed(seed)
    text = text_module(model)
    for layer in text.layers:
        attention = layer.self_attn
        for norm in (attention.q_norm, getattr(attention, "k_norm", None)):
            if norm is not None:
                _qk_norm_weight(norm, attention.head_dim, generator)
        _uniform(layer.layer_scalar, 0.7, 1.3, generator)
        if layer.enable_moe_block:
            _make_router_decide(layer.router, generator)
    for name, parameter in text.named_parameters():
        if NORM_WEIGHT.search(name) and not name.endswith(("q_norm.weight", "k_norm.weight")):
            _uniform(parameter, 0.6, 1.4, generator)
    cap = model.config.get_text_config().final_logit_softcapping
    if cap is None:  # no softcap to reach: HF's initial logit scale stays
        return
    seen: list[torch.Tensor] = []
    hook = model.lm_head.register_forward_hook(lambda module, args, output: seen.append(output))
    try:
        model(input_ids=sample_ids)
    finally:
        hook.remove()
    text.norm.weight.mul_(PRE_CAP_LOGIT_RATIO * cap / float(seen[0].abs().max()))


@torch.no_grad()
def make_vision_look_trained(
    model: nn.Module, pixel_values: torch.Tensor, image_position_ids: torch.Tensor, *, seed: int
) -> None:
    """Norm weights, q/k norms (:func:`_qk_norm_weight`), position table, standardization and clip
    bounds of ``model``'s vision tower."""
    generator = torch.Generator().manual_seed(seed)
    tower = model.model.vision_tower
    for name, module in tower.named_modules():
        if name.endswith(("q_norm", "k_norm")):
            _qk_norm_weight(module, tower.config.head_dim, generator)
    for name, parameter in tower.named_parameters():
        if name.endswith("norm.weight") and not name.endswith(("q_norm.weight", "k_norm.weight")):
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
        inputs, outputs = seen[module]
        for values, low, high in ((inputs, "input_min", "input_max"), (outputs, "output_min", "output_max")):
            quantiles = torch.quantile(values[:100_000], torch.tensor([CLIPPED_FRACTION, 1 - CLIPPED_FRACTION]))
            getattr(module, low).fill_(float(quantiles[0]))
            getattr(module, high).fill_(float(quantiles[1]))
