"""Faults of a port's static scheme, each in a wrapper port around this runtime in ``a8w8`` (or
``a16w8``) that is calibrated through the port interface (:meth:`~gemma4_static.ports.Gemma4Port.calibrate`),
reports the ranges it fixed (:meth:`~gemma4_static.ports.Gemma4Port.observed_ranges`) and
exposes its layers' outputs, as a port whose NPU recipe calibrates it would. Each is a bug such a
recipe ships: calibration that observes the static buffer's padding, a matmul's range taken before
the norm that feeds it, per-channel weight scales read along the wrong axis, one site's zero point
dropped. :data:`CAUGHT_BY` names the stages whose rows catch each (the self-test lane holds it)."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from ...ports import PortPrefill, SchemeLimits, SchemeRecipe, representable_range
from ...ports.prompt import Prompt
from ...ports.static import StaticRuntimePort
from ...quant.fake_quant import signed_range
from .host_faults import HostStagesPort

RECIPES = tuple(
    SchemeRecipe(scheme, f"this runtime's {scheme}", bits, "per tensor", False, 8, "per channel", True, "linears")
    for scheme, bits in (("a16w8", 16), ("a8w8", 8))
)


class StaticSchemePort(HostStagesPort):
    """This runtime in a static scheme seen from outside: calibrated through the port interface, the
    ranges its sites quantize with reported, its layers' outputs exposed."""

    name = "wrapped gemma4-static, static scheme"
    limits = dataclasses.replace(
        HostStagesPort.limits, schemes=SchemeLimits(tuple(recipe.scheme for recipe in RECIPES), RECIPES)
    )

    def prefill(self, prompt: Prompt, *, keep_intermediates: bool = False) -> PortPrefill:
        result = self.inner.prefill(prompt, keep_intermediates=keep_intermediates)
        return dataclasses.replace(result, per_layer_inputs=None, soft_tokens=None, extra={})

    def calibrate(self, prompts: list[Prompt]) -> None:
        self.inner.calibrate(prompts)
        self.after_calibration(prompts)

    def after_calibration(self, prompts: list[Prompt]) -> None:
        """The fault, applied to the calibrated profile."""

    def observed_ranges(self) -> dict[str, tuple[float, float]]:
        return {
            site.name: representable_range(
                float(site.activation.scale),
                float(site.activation.zero_point),
                site.activation.low,
                site.activation.high,
            )
            for site in self.sites
            if site.activation is not None and site.activation.scale is not None
        }

    @property
    def sites(self) -> list[Any]:
        return self.inner.runtime.quantization.sites


def set_range(site: Any, low: float, high: float) -> None:
    """``site``'s activation range fixed at ``[low, high]`` (as if that is what its observer saw)."""
    site.activation.observer.reset_min_max_vals()
    site.activation.observe(torch.tensor([low, high]))
    site.activation.freeze()


class CalibratedOnPadding(StaticSchemePort):
    name = "fault: calibrated-on-padding"
    bug = "its calibration observes the whole static buffer: the pad positions after each prompt count as tokens"

    def calibrate(self, prompts: list[Prompt]) -> None:
        room = self.inner.setup.max_seq - 1
        padded = []
        for prompt in prompts:
            rows, length = prompt.input_ids.shape
            pads = torch.full((rows, room - length), self.pad_token_id, dtype=prompt.input_ids.dtype)
            ids = torch.cat((torch.where(prompt.attention_mask.bool(), prompt.input_ids, self.pad_token_id), pads), 1)
            padded.append(Prompt(ids, torch.ones_like(ids)))
        super().calibrate(padded)


class RangeBeforeTheNorm(StaticSchemePort):
    name = "fault: range-before-the-norm"
    bug = "each layer's q/k/v input range is the range of the residual stream, before the norm that feeds them"

    def after_calibration(self, prompts: list[Prompt]) -> None:
        floating = StaticRuntimePort(self.inner.model, dataclasses.replace(self.inner.setup, batch_size=1))
        states = [floating.prefill(prompt, keep_intermediates=True).hidden_states for prompt in prompts]
        for layer in range(len(states[0]) - 1):
            valid = [prompt.attention_mask.bool() for prompt in prompts]
            seen = torch.cat([hidden[layer][mask] for hidden, mask in zip(states, valid, strict=True)])
            for site in self.sites:
                if site.name in (f"layer {layer} q_proj", f"layer {layer} k_proj", f"layer {layer} v_proj"):
                    set_range(site, float(seen.min()), float(seen.max()))


class ScalesAlongTheInputs(StaticSchemePort):
    name = "fault: scales-along-the-inputs"
    bug = "its per-channel weight scales (one per output row) applied along the input columns"

    def after_calibration(self, prompts: list[Prompt]) -> None:
        low, high = signed_range(8)
        for site in self.sites:
            weight = site.original.detach().float()
            scales = weight.abs().amax(dim=1).clamp(min=1e-12) / high  # one per output row
            along = scales[torch.arange(weight.shape[1]) % weight.shape[0]]  # read by column
            fake = (weight / along).round().clamp(low, high) * along
            site.quantized.data.copy_(fake)  # in its dtype


class ZeroPointDropped(StaticSchemePort):
    name = "fault: zero-point-dropped"
    bug = "the site with the most one-sided range runs with its zero point dropped (its range read as symmetric)"

    def after_calibration(self, prompts: list[Prompt]) -> None:
        ranged = [site for site in self.sites if site.activation is not None and site.activation.observed]
        lopsided = max(ranged, key=lambda site: abs(float(site.activation.zero_point)))
        lopsided.activation.zero_point = torch.zeros_like(lopsided.activation.zero_point)


# each fault and the stages whose rows fail in a8w8 on the tiny model (the numerics do not move past
# the gates for the padding and the zero point there: its activations are near symmetric and the
# padding's extremes few; only the ranges the port reports show them)
CAUGHT_BY = {
    CalibratedOnPadding: ("quantization",),
    RangeBeforeTheNorm: ("quantization", "decoder layers", "KV cache", "prefill logits", "decode steps", "generation"),
    ScalesAlongTheInputs: ("decoder layers", "KV cache", "prefill logits", "decode steps"),
    ZeroPointDropped: ("quantization",),
}
