"""Faults of this project's own fake quantization (:mod:`gemma4_static.quant`): bugs an integer
profile's implementation ships, which a reference built with the same code would share. The oracle's
same-scheme HF model is built with torchao (:mod:`..numerics.reference_quant`), so each of these
moves only the runtime's side: the ``quantization`` check group (every site against torchao) and
the deficit against HF in the same scheme catch it."""

from __future__ import annotations

from typing import Any

import torch

from ...quant import fake_quant, profile, sites
from .faults import Fault


def _zero_point_dropped(original: Any) -> Any:
    def freeze(self: fake_quant.ActivationQuantizer) -> None:
        original(self)
        self.zero_point = torch.zeros_like(self.zero_point)

    return freeze


def _groups_down_columns(original: Any) -> Any:
    def quantized_weight(weight: torch.Tensor, bits: int, group_size: int | None = None) -> torch.Tensor:
        # the blocks read down a column (the transpose's rows) instead of along a row
        return original(weight.t().contiguous(), bits, group_size).t().contiguous()

    return quantized_weight


def _down_proj_takes_up_proj_range(original: Any) -> Any:
    def calibrate(self: profile.QuantProfile, run: Any, *, unreached: str = "error") -> None:
        original(self, run, unreached=unreached)
        by_name = {site.name: site for site in self.sites}
        for site in self.sites:
            up = by_name.get(site.name.replace("down_proj", "up_proj"))
            if site.name.endswith(" down_proj") and up is not None and site.activation is not None:
                site.activation.copy_range(up.activation)

    return calibrate


NEEDS_QUANT = "a fault of the fake quantization: only an integer profile (--quant) runs it"

QUANT_FAULTS: tuple[Fault, ...] = (
    Fault(
        "quant-zero-point-dropped",
        "activation ranges frozen without their zero point (an asymmetric range read as symmetric)",
        ((fake_quant.ActivationQuantizer, "freeze", _zero_point_dropped),),
        needs_quant=NEEDS_QUANT,
    ),
    Fault(
        "quant-groups-down-columns",
        "weight scales per block of a column instead of per row (or per group of a row)",
        ((fake_quant, "quantized_weight", _groups_down_columns), (sites, "quantized_weight", _groups_down_columns)),
        needs_quant=NEEDS_QUANT,
    ),
    Fault(
        "quant-range-from-wrong-site",
        "each down_proj input quantized with the range observed at its layer's up_proj input",
        ((profile.QuantProfile, "calibrate", _down_proj_takes_up_proj_range),),
        needs_quant=NEEDS_QUANT,
    ),
)
