"""What an integer profile needs before any check: HF in the same scheme beside the port, and, for a
static scheme, the calibration both sides take from the same prompts (every row of the
:data:`CALIBRATION_SEEDS` sample prompts of the port's shape, other content than the one checked,
each alone and unpadded: padding is never calibration data, so a port whose calibration observes its
static buffer's padding shows ranges wider than HF's): this runtime its fake
quantization's ranges, another port in its own recipe (:meth:`~gemma4_static.ports.Gemma4Port.calibrate`,
on every port the run builds), HF's reference through torchao (:func:`..numerics.quantized.calibrated_hf`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...executorch.xnnpack_quant import XnnpackQuantization
from ...ports import Gemma4Port, PortSetup
from ...ports.static import StaticRuntimePort
from ...quant import QuantProfile, Scheme
from ..numerics.quantized import CALIBRATION_SEEDS, calibrated_hf, dynamic_hf
from ..references.samples import Prompt, text_prompt
from .sample_plan import sample_prompt


@dataclass(frozen=True)
class SchemeSides:
    """Both sides of a profile: HF beside the port (the model as it is, or in the same integer
    scheme), its same-scheme sites by name (torchao), and for a static scheme the calibration rows
    and this runtime's calibrated ranges (``adopted`` by every further instance of it)."""

    hf_model: Any
    hf_sites: dict[str, Any] = field(default_factory=dict)
    calibration: list[Prompt] | None = None
    adopted: QuantProfile | XnnpackQuantization | None = None


def prepared_scheme(scheme: Scheme | None, port: Gemma4Port, model: Any, setup: PortSetup) -> SchemeSides:
    """HF beside ``port`` (built for ``setup``) in ``scheme`` (none: HF as it is), ``port``
    calibrated where the scheme is static."""
    if scheme is None:
        return SchemeSides(model)
    if scheme.dynamic:
        return SchemeSides(dynamic_hf(model, scheme))
    prompts = [sample_prompt(model.config, port.limits, seed=seed) for seed in CALIBRATION_SEEDS]
    rows = calibration_rows(prompts)
    if isinstance(port, StaticRuntimePort) and not isinstance(port.runtime.quantization, QuantProfile):
        port.calibrate(prompts)  # XNNPACK's programs: calibrated at the shapes they run (its padding included)
    else:
        calibrate(port, rows, setup)
    adopted = port.runtime.quantization if isinstance(port, StaticRuntimePort) else None
    hf_model, hf_sites = calibrated_hf(model, scheme, rows)
    return SchemeSides(hf_model, hf_sites, rows, adopted)


def calibration_rows(prompts: list[Prompt]) -> list[Prompt]:
    """Every row of ``prompts`` alone, without its padding (:meth:`~gemma4_static.ports.Prompt.row`)."""
    return [prompt.row(index) for prompt in prompts for index in range(prompt.input_ids.shape[0])]


def calibration_prompts(config: Any, limits: Any, setup: PortSetup) -> list[Prompt]:
    """The calibration rows of a port with ``limits`` built for ``setup``: the session's
    (:func:`calibration_rows` of the sample prompts of :data:`CALIBRATION_SEEDS`), or where they
    outgrow ``setup``'s static length, text rows as long as it holds (a port that needs an image in a
    fixed profile: its prompts always fit)."""
    rows = calibration_rows([sample_prompt(config, limits, seed=seed) for seed in CALIBRATION_SEEDS])
    room = limits.capacity(setup.max_seq)
    if all(row.input_ids.shape[1] <= room for row in rows):
        return rows
    return [text_prompt(config, [room], seed=seed) for seed in CALIBRATION_SEEDS]


def calibrate(port: Gemma4Port, rows: list[Prompt], setup: PortSetup) -> None:
    """``port`` (built for ``setup``) calibrated in its own recipe on ``rows`` (each one unpadded row,
    :func:`calibration_rows`), laid out on its padding side."""
    port.calibrate([row.padded(port.limits.batch.padding_side) for row in rows])
