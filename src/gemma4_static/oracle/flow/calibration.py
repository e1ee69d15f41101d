"""What an integer profile needs before any check: HF in the same scheme beside the port, and, for a
static scheme, the calibration both sides take from the same prompts (every row of the
:data:`CALIBRATION_SEEDS` sample prompts of the port's shape, other content than the one checked,
each alone and unpadded: padding is never calibration data, so a port whose calibration observes its
static buffer's padding shows ranges wider than HF's): this runtime its fake
quantization's ranges, another port in its own recipe (:meth:`~gemma4_static.ports.base.Gemma4Port.calibrate`,
on every port the session builds), HF's reference through torchao (:func:`..numerics.quantized.calibrated_hf`)."""

from __future__ import annotations

from typing import Any

from ...ports.base import Gemma4Port, PortSetup
from ...ports.static import StaticRuntimePort
from ...quant import QuantProfile
from ..numerics.quantized import CALIBRATION_SEEDS, calibrated_hf, dynamic_hf
from ..references.samples import Prompt, text_prompt
from .sample_plan import sample_prompt


def prepare_scheme(session: Any, port: Gemma4Port, model: Any) -> None:
    """Set ``session``'s HF beside ``port`` in the session's scheme (none: HF as it is) and calibrate
    ``port`` where the scheme is static."""
    scheme = session.scheme
    session.hf_model = model
    if scheme is None:
        return
    if scheme.dynamic:
        session.hf_model = dynamic_hf(model, scheme)
        return
    prompts = [sample_prompt(model.config, port.limits, seed=seed) for seed in CALIBRATION_SEEDS]
    session.calibration = calibration_rows(prompts)
    if isinstance(port, StaticRuntimePort) and not isinstance(port.runtime.quantization, QuantProfile):
        port.calibrate(prompts)  # XNNPACK's programs: calibrated at the shapes they run (its padding included)
    else:
        calibrate(port, session.calibration, session.setup)
    if isinstance(port, StaticRuntimePort):  # its ranges, adopted by every port the session builds
        session.quant = port.runtime.quantization
    session.hf_model, session.hf_sites = calibrated_hf(model, scheme, session.calibration)


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
    port.calibrate([row.padded(port.limits.padding_side) for row in rows])
