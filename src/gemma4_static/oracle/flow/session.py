"""A verification session: the model, the sample prompt, the port under test and both prefills,
prepared once and shared by every check group of :mod:`.verify`.

The sample prompt follows the port's limits (:class:`~gemma4_static.ports.base.PortLimits`): a
ragged batch of 2 right-padded rows where the port takes them, one unpadded row where it takes
batch 1 or no padding; two images per row (two image slots of different sizes) on a multimodal
model where the port takes images."""

from __future__ import annotations

import contextlib
import copy
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ...ports.base import Gemma4Port, NotExposed, PortLimits, PortPrefill, PortSetup
from ...ports.registry import DEFAULT_PORT, port_factory
from ...ports.static import StaticRuntimePort
from ...quant import QuantProfile, XnnpackQuantization
from ...runtime import PrefillOutputs, StaticGemma4Runtime
from ...spec import read_text_config
from ..checks.report import Row, skip_row
from ..checks.routing import RoutingLedger
from ..numerics.gates import GATES, Gate, quant_gate
from ..numerics.overflow import recorded_ranges
from ..numerics.quantized import CALIBRATION_SEEDS, calibrated_hf
from ..references.hf import hf_prefill
from ..references.samples import Prompt, image_prompt, text_prompt
from .profiles import checked_profile

LAYER_GROUP = 5  # the report shows decoder layers in groups of one 4:1 period


@dataclass
class Session:
    """Everything the stage checks share: the model (in the profile's dtype), the sample prompt, the
    port, the prefill outputs of both sides (computed once); for a low-precision profile also HF in
    float64 and its prefill (the reference). ``ranges`` collects the overflow report."""

    model: Any
    dtype: torch.dtype
    steps: int
    prompt: Prompt
    port: Gemma4Port
    prefilled: PortPrefill | Exception
    theirs: Any
    port_name: str = DEFAULT_PORT
    backend: str = "torch"
    reference_model: Any = None
    reference: Any = None
    ranges: dict[str, float] = field(default_factory=dict)
    routing: RoutingLedger | None = None
    hf_model: Any = None  # HF in the profile: the same dtype, or quantized in the same scheme
    quant: QuantProfile | XnnpackQuantization | None = None  # an integer profile: the runtime's calibrated one

    @property
    def low_precision(self) -> bool:
        """Checked against HF in float64 under the profile's gates (bf16, fp16 or an integer scheme)."""
        return self.reference_model is not None

    @property
    def gate(self) -> Gate:
        return GATES[self.dtype] if self.quant is None else quant_gate(self.quant.scheme.name, self.backend)

    @property
    def config(self) -> Any:
        return self.model.config

    @property
    def has_per_layer_inputs(self) -> bool:
        """Whether the model has per-layer embeddings (the PLE checks have nothing to compare otherwise)."""
        return bool(self.config.get_text_config().hidden_size_per_layer_input)

    @property
    def window(self) -> int:
        return read_text_config(self.config).sliding_window

    @property
    def ours(self) -> PortPrefill:
        """The port's prefill of the sample prompt; the port's own error again if it raised there
        (so each check that needs it fails with that error, and the others still run)."""
        if isinstance(self.prefilled, Exception):
            raise self.prefilled
        return self.prefilled

    @property
    def is_runtime(self) -> bool:
        """Whether the port under test is this project's runtime."""
        return isinstance(self.port, StaticRuntimePort)

    @property
    def runtime(self) -> StaticGemma4Runtime:
        """This project's runtime, for the checks only it can answer (its static inputs, cache layout,
        mask value, overflow report, exported stages); ``NotExposed`` for any other port."""
        if not self.is_runtime:
            raise NotExposed(f"{self.port.name} is another port: a check of this project's runtime internals")
        return self.port.runtime

    @property
    def runtime_outputs(self) -> PrefillOutputs:
        """This runtime's own prefill outputs (static inputs, embeddings before fusion)."""
        if not self.is_runtime:
            raise NotExposed(f"{self.port.name} is another port: this project's static inputs")
        return self.ours.extra["outputs"]

    def exposed(self, value: Any, what: str) -> Any:
        """``value``, or ``NotExposed`` naming ``what`` the port did not return (``value`` is ``None``)."""
        if value is None:
            raise NotExposed(f"{self.port.name} does not expose {what}")
        return value

    def recording(self) -> contextlib.AbstractContextManager:
        """Record the overflow report while a block runs (this project's runtime; nothing for another port)."""
        return recorded_ranges(self.port.runtime, self.ranges) if self.is_runtime else contextlib.nullcontext()

    def routing_active(self) -> contextlib.AbstractContextManager:
        """Record expert choices and pin HF at routing ties while a block runs (a MoE model on this
        runtime's PyTorch stages in float32: :mod:`..checks.routing`; nothing otherwise)."""
        return contextlib.nullcontext() if self.routing is None else self.routing.active(self.model)

    def build_port(self, setup: PortSetup) -> Gemma4Port:
        """Another instance of the port under test (e.g. with a prefill chunk), on the session's model
        (in an integer profile: quantized with the session's calibrated ranges)."""
        quant = None if self.quant is None else self.quant.scheme.name
        port = make_port(self.port_name, self.model, setup, backend=self.backend, quant=quant)
        if self.quant is not None:
            port.runtime.quantization.adopt(self.quant)
        return port


def guarded(stage: str, check: str, rows: Callable[[], Iterable[Row]]) -> list[Row]:
    """The rows of one check; one SKIP row with the reason when the port cannot answer it; one FAIL
    row naming the error when the port raises (an error of the checks themselves propagates)."""
    try:
        return list(rows())
    except NotExposed as reason:
        return [skip_row(stage, check, str(reason))]
    except Exception as error:
        if raised_in(error) == "oracle":
            raise
        where = traceback.extract_tb(error.__traceback__)[-1]
        raised = f"{type(error).__name__}: {error} ({Path(where.filename).name}:{where.lineno})"
        return [Row(stage, f"{check}: the port raised", "errors", 1, 0, detail=raised)]


def raised_in(error: BaseException) -> str:
    """``"oracle"`` when the innermost frame of this package that raised lies in the oracle (a broken
    check, which must never count as a finding about the port), else ``"port"`` (the runtime, a port
    adapter or the code it drives)."""
    package = Path(__file__).resolve().parents[2]
    innermost = "port"
    for frame, _ in traceback.walk_tb(error.__traceback__):
        path = Path(frame.f_code.co_filename).resolve()
        if path.is_relative_to(package):
            innermost = "oracle" if path.is_relative_to(package / "oracle") else "port"
    return innermost


def make_port(
    name: str,
    model: Any,
    setup: PortSetup,
    *,
    backend: str = "torch",
    mask_value: float | None = None,
    quant: str | None = None,
) -> Gemma4Port:
    """Port ``name`` built for ``setup``; the runtime's own options (``backend``, ``mask_value``,
    ``quant``) only for this project's runtime (a ``ValueError`` for another port)."""
    factory = port_factory(name)
    if factory is StaticRuntimePort:
        return StaticRuntimePort(model, setup, backend=backend, mask_value=mask_value, quant=quant)
    if backend != "torch" or mask_value is not None or quant is not None:
        raise ValueError(f"backend and mask_value are options of the gemma4-static runtime, not of port {name!r}")
    port = factory(model, setup)
    if not isinstance(port, Gemma4Port):
        raise ValueError(f"port {name!r} returned {type(port).__name__}, not a Gemma4Port")
    return port


SECOND_IMAGE = ((2, (40, 72), 70),)  # an image of another size mid-prompt: two image slots per row


def sample_prompt(config: Any, limits: PortLimits, *, seed: int = 0) -> Prompt:
    """The sample prompt a port with ``limits`` takes (see the module docstring); another ``seed``
    gives the same shape and image slots with other content."""
    window = read_text_config(config).sliding_window
    single = limits.max_batch == 1 or limits.padding_side is None
    if limits.images and getattr(config, "vision_config", None) is not None:
        return image_prompt(config, text_after=[6] if single else [6, 2], then=SECOND_IMAGE, seed=seed)
    return text_prompt(config, [window + 3] if single else [window + 3, window // 2], seed=seed)


def open_session(
    model: Any,
    *,
    dtype: torch.dtype = torch.float32,
    max_seq: int | None = None,
    steps: int | None = None,
    backend: str = "torch",
    mask_value: float | None = None,
    port: str = DEFAULT_PORT,
    quant: str | None = None,
) -> Session:
    """Prepare a verification run of ``port`` (a built-in name or ``module:factory``): the sample
    prompt it takes, the port sized for it plus ``steps`` decode steps, and both prefills. With
    ``quant`` (a scheme of :data:`~gemma4_static.quant.SCHEMES`) this runtime and HF run in that
    integer profile, calibrated on :data:`..numerics.quantized.CALIBRATION_SEEDS` sample prompts."""
    scheme = checked_profile(model, dtype, quant, backend, port)
    limits = getattr(port_factory(port), "limits", PortLimits())
    float32 = dtype == torch.float32 and scheme is None
    reference_model = None if float32 else copy.deepcopy(model).double()
    model = model if dtype == torch.float32 else copy.deepcopy(model).to(dtype)
    window = read_text_config(model.config).sliding_window
    steps = steps if steps is not None else min(2 * window + 3, 24)
    prompt = sample_prompt(model.config, limits)
    needed = prompt.input_ids.shape[1] + steps + 1
    max_seq = needed if max_seq is None else max_seq
    if max_seq < needed:
        raise ValueError(f"max_seq must be at least {needed} for this prompt and {steps} steps, got {max_seq}")
    setup = PortSetup(max_seq, prompt.input_ids.shape[0], prompt.image_slots)
    under_test = make_port(port, model, setup, backend=backend, mask_value=mask_value, quant=quant)
    session = Session(model, dtype, steps, prompt, under_test, PortPrefill(torch.empty(0)), None, port, backend)
    session.hf_model = model
    if scheme is not None:
        calibration = [sample_prompt(model.config, limits, seed=seed) for seed in CALIBRATION_SEEDS]
        runtime = under_test.runtime
        runtime.calibrate(lambda: [under_test.prefill(prompt, keep_intermediates=True) for prompt in calibration])
        session.quant = runtime.quantization
        session.hf_model, _ = calibrated_hf(model, scheme, calibration)
    moe = model.config.get_text_config().enable_moe_block
    if moe and session.is_runtime and backend == "torch" and dtype == torch.float32:
        session.routing = RoutingLedger()
    with session.recording(), session.routing_active():
        try:
            session.prefilled = under_test.prefill(prompt, keep_intermediates=True)
        except Exception as error:
            if raised_in(error) == "oracle":
                raise
            session.prefilled = error
    session.reference_model = reference_model
    session.reference = None if reference_model is None else hf_prefill(reference_model, prompt)
    with session.routing_active():
        session.theirs = hf_prefill(session.hf_model, prompt)
    return session
