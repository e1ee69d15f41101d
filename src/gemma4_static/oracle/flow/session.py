"""A verification session: the model, the sample prompt, the port under test and both prefills,
prepared once and shared by every check group of :mod:`.verify`. The sample prompt follows the port's
limits (:class:`~gemma4_static.ports.limits.PortLimits`): a ragged batch of 2 right-padded rows where
the port takes them, else one unpadded row; two images per row (two slots of different sizes) on a
multimodal model where the port takes any images, one row in its first image profile where it has one."""

from __future__ import annotations

import contextlib
import copy
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from ...executorch.backends import backend_named
from ...executorch.xnnpack_quant import XnnpackQuantization
from ...ports.base import Gemma4Port, NotExposed, PortPrefill, PortSetup
from ...ports.registry import DEFAULT_PORT, declared_limits, port_factory
from ...ports.static import StaticRuntimePort
from ...quant import QuantProfile, Scheme
from ...runtime import PrefillOutputs, StaticGemma4Runtime
from ...spec import read_text_config
from ..checks.report import Row
from ..checks.routing import RoutingLedger
from ..numerics.gates import GATES, Gate, quant_gate
from ..numerics.overflow import recorded_ranges
from ..references.hf import hf_prefill
from ..references.samples import Prompt
from .calibration import calibrate, calibration_prompts, prepare_scheme
from .port_calls import make_port, port_prefill
from .profiles import checked_profile, refused_scheme
from .sample_plan import ONE_ROW, sample_plan
from .shards import Shard

LAYER_GROUP = 5  # the report shows decoder layers in groups of one 4:1 period
# port calls the schedules grid runs by default: tiny's grid whole, E2B's in minutes (without chunks of 1)
GRID_BUDGET = 3000
log = logging.getLogger(__name__)


@dataclass
class Session:
    """Everything the stage checks share: the model (in the profile's dtype), the sample prompt, the
    port, the prefill outputs of both sides (computed once); for a low-precision profile also HF in
    float64 and its prefill (the reference). ``ranges`` collects the overflow report."""

    model: Any
    dtype: torch.dtype
    steps: int
    prompt: Prompt  # right-padded, as HF runs it
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
    scheme: Scheme | None = None  # the integer profile, run by this runtime or by the port's own recipe
    quant: QuantProfile | XnnpackQuantization | None = None  # this runtime's calibrated integer profile
    hf_sites: dict[str, Any] = field(default_factory=dict)  # HF's same-scheme sites (torchao) by site name
    schedules_budget: int = GRID_BUDGET  # port calls the schedules grid may spend
    setup: PortSetup | None = None  # what the port under test was built for (its static length)
    rows: list[Row] = field(default_factory=list)  # the rows of the groups run so far (own-checks reads them)
    calibration: list[Prompt] | None = None  # a static scheme's calibration prompts
    figures: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # what a report draws (checks.figures)
    shard: Shard | None = None  # the part of a split run this process runs (.shards)

    @property
    def port_prompt(self) -> Prompt:
        """The sample prompt as the port takes it (left-padded for a port whose limits say so)."""
        return self.prompt.padded(self.port.limits.padding_side)

    @property
    def low_precision(self) -> bool:
        """Checked against HF in float64 under the profile's gates (bf16, fp16 or an integer scheme)."""
        return self.reference_model is not None

    @property
    def gate(self) -> Gate:
        return GATES[self.dtype] if self.scheme is None else quant_gate(self.scheme.name, self.backend)

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
        """This project's runtime, for the checks only it can answer (its chunk masks, overflow report,
        vision sub-stages); ``NotExposed`` for any other port."""
        if not self.is_runtime:
            raise NotExposed(f"{self.port.name} is another port: a check of this project's runtime internals")
        return self.port.runtime

    @property
    def runtime_outputs(self) -> PrefillOutputs:
        """This runtime's own prefill outputs (its embeddings before fusion); ``NotExposed`` for another port."""
        return self.runtime and self.ours.extra["outputs"]

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

    def capped(self, max_seq: int) -> int:
        """``max_seq`` within the port's own ``limits.max_seq``."""
        return min(max_seq, self.port.limits.max_seq or max_seq)

    def static_length(self, needed: int) -> int:  # within the port's limits (its image profile's span too)
        return self.capped(max(needed, self.port.limits.shortest_static_length))

    @contextlib.contextmanager
    def built(self, setup: PortSetup) -> Iterator[Gemma4Port]:
        """Another instance of the port under test for ``setup`` (e.g. with a prefill chunk) while the
        block runs, closed after it; on the session's model (in an integer profile: quantized with
        this runtime's calibrated ranges, another port in its own recipe). ``NotExposed`` when ``setup``
        exceeds the port's limits."""
        limits = self.port.limits
        setup = replace(setup, max_seq=max(setup.max_seq, limits.shortest_static_length))  # its image's slot
        if limits.max_seq is not None and setup.max_seq > limits.max_seq:
            raise NotExposed(f"{self.port.name} takes max_seq up to {limits.max_seq}; this check needs {setup.max_seq}")
        quant = None if self.scheme is None else self.scheme.name
        port = make_port(self.port_name, self.model, setup, backend=self.backend, quant=quant)
        try:
            if self.quant is not None:
                port.runtime.quantization.adopt(self.quant)
            elif self.calibration is not None:  # a port's static recipe: every port it builds calibrates
                calibrate(port, calibration_prompts(self.config, port.limits, setup), setup)
            yield port
        finally:
            port.close()

    def close(self) -> None:
        """Done with the port under test: :meth:`~gemma4_static.ports.base.Gemma4Port.close`."""
        self.port.close()


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
    admit: Callable[[Prompt, int, PortSetup], None] = lambda prompt, steps, setup: None,
) -> Session:
    """Prepare a verification run of ``port`` (a built-in name or ``module:factory``): the sample
    prompt it takes, the port sized for it plus ``steps`` decode steps, and both prefills. The port's
    limits are read from the port built (:func:`declared_limits` first, where the factory declares
    them; else from a port built for one unpadded text row, built again if its limits ask for another
    prompt). With ``quant`` (a scheme of :data:`~gemma4_static.quant.SCHEMES`) this runtime and HF run
    in that integer profile, calibrated on :data:`..numerics.quantized.CALIBRATION_SEEDS` sample
    prompts; another port runs a dynamic scheme of its ``limits.schemes`` in its own recipe, HF the
    same scheme through torchao (:func:`..numerics.quantized.dynamic_hf`); ``admit`` sees the plan first."""
    scheme = checked_profile(model, dtype, quant, backend, port)
    float32 = dtype == torch.float32 and scheme is None
    reference_model = None if float32 else copy.deepcopy(model).double()
    model = model if dtype == torch.float32 else copy.deepcopy(model).to(dtype)
    window = read_text_config(model.config).sliding_window
    wanted = steps if steps is not None else min(2 * window + 3, 24)
    limits = declared_limits(port_factory(port)) or ONE_ROW
    plan = sample_plan(model.config, limits, wanted, max_seq)
    under_test = make_port(port, model, plan[2], backend=backend, mask_value=mask_value, quant=quant)
    try:
        own = sample_plan(model.config, under_test.limits, wanted, max_seq)
        if own[1:] != plan[1:]:  # its own limits ask for another prompt or setup
            plan = own
            under_test.close()
            under_test = make_port(port, model, plan[2], backend=backend, mask_value=mask_value, quant=quant)
        if dtype not in under_test.limits.dtypes:
            names = [str(name).removeprefix("torch.") for name in under_test.limits.dtypes]
            raise ValueError(f"port {port!r} runs {names}, not {dtype}")
        if scheme is not None and port != DEFAULT_PORT:
            refused_scheme(port, under_test.limits, scheme.name)
        admit(*plan)  # a recorded reference answers this plan (or records it)
        return _prepared(under_test, model, dtype, plan, port, backend, scheme, reference_model)
    except BaseException:
        under_test.close()
        raise


def _prepared(
    under_test: Gemma4Port,
    model: Any,
    dtype: torch.dtype,
    plan: tuple[Prompt, int, PortSetup],
    port: str,
    backend: str,
    scheme: Any,
    reference_model: Any,
) -> Session:
    """The session of a built port: calibrated for an integer profile, both prefills run."""
    prompt, steps, _ = plan
    session = Session(model, dtype, steps, prompt, under_test, PortPrefill(torch.empty(0)), None, port, backend)
    session.setup = plan[2]
    session.scheme = scheme
    prepare_scheme(session, under_test, model)
    moe = model.config.get_text_config().enable_moe_block
    if moe and session.is_runtime and backend_named(backend).eager and dtype == torch.float32:
        session.routing = RoutingLedger()
    log.info("prefilling the sample prompt (%d x %d tokens) on %s", *prompt.input_ids.shape, under_test.name)
    with session.recording(), session.routing_active():
        session.prefilled = port_prefill(under_test, session.port_prompt, keep_intermediates=True)
    session.reference_model = reference_model
    log.info("prefilling the sample prompt on HF%s", "" if reference_model is None else " and HF float64")
    session.reference = None if reference_model is None else hf_prefill(reference_model, prompt)
    with session.routing_active():
        session.theirs = hf_prefill(session.hf_model, prompt)
    return session
