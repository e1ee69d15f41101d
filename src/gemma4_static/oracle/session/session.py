"""A verification session: the model, the sample prompt, the port under test and both prefills,
prepared once by :func:`open_session` and read by every check group (never written after: the
three collectors ``rows``, ``figures`` and ``ranges`` fill as the groups run). The sample prompt
follows the port's limits (:class:`~gemma4_static.ports.limits.PortLimits`): a ragged batch of 2
right-padded rows where the port takes them, else one unpadded row; two images per row (two slots of
different sizes) on a multimodal model where the port takes any images, one row in its first image
profile where it has one."""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any

import torch

from ...backends import backend_named
from ...ports import Gemma4Port, NotExposed, PortPrefill, PortSetup
from ...ports.capabilities.runtime_internals import RUNTIME_INTERNALS
from ...ports.registry import DEFAULT_PORT, declared_limits, port_factory
from ...quant import Scheme
from ...runtime import PrefillOutputs, StaticGemma4Runtime
from ...spec import read_text_config
from ..checks.routing import RoutingLedger
from ..numerics.gates import GATES, Gate, quant_gate
from ..numerics.overflow import recorded_ranges
from ..options import VerifyOptions, refused_scheme
from ..references.hf import hf_prefill
from ..references.reference_folder import admission
from ..references.samples import Prompt
from ..references.streamed import converted, streamed
from ..results.report import Row
from .calibration import SchemeSides, prepared_scheme
from .port_calls import port_prefill
from .port_under_test import PortUnderTest, bound_builder
from .sample_plan import ONE_ROW, sample_plan

LAYER_GROUP = 5  # the report shows decoder layers in groups of one 4:1 period
# HF's sample-prompt logits kept per forward, in elements of (rows, positions, vocab): every position
# within it (the embedded models), else evenly spaced ones and each row's last (E2B's vocabulary of
# 262,144: 32 positions of 2 rows, 134 MB in float64 instead of 2.2 GB for its 515-token prompt)
LOGITS_BUDGET = 1 << 24
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Session:
    """Everything the check groups share: the run's ``options``, the model (in the profile's dtype),
    the port under test (``under_test``) and its instance for the sample setup (``port``), the sample
    prompt, decode steps and setup, the prefill outputs of both sides (computed once), HF beside the
    port in the profile (``sides``: the same dtype, or quantized in the same scheme); for a
    low-precision profile also HF in float64 and its prefill (the reference); the routing ledger of
    a mixture-of-experts model on this runtime in float32. Collected as the groups run: their
    ``rows`` (own-checks reads them), what a report draws (``figures``), the overflow report
    (``ranges``)."""

    options: VerifyOptions
    model: Any
    under_test: PortUnderTest
    port: Gemma4Port
    prompt: Prompt  # right-padded, as HF runs it
    steps: int
    setup: PortSetup  # what the sample setup's port was built for (its static length)
    prefilled: PortPrefill | Exception
    theirs: Any
    sides: SchemeSides
    reference_model: Any = None
    reference: Any = None
    routing: RoutingLedger | None = None
    rows: list[Row] = field(default_factory=list)
    figures: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    ranges: dict[str, float] = field(default_factory=dict)

    @property
    def dtype(self) -> torch.dtype:
        return self.options.dtype

    @property
    def scheme(self) -> Scheme | None:
        """The integer profile, run by this runtime or by the port's own recipe."""
        return self.options.scheme

    @property
    def hf_model(self) -> Any:
        """HF in the profile: the same dtype, or quantized in the same scheme."""
        return self.sides.hf_model

    @property
    def port_prompt(self) -> Prompt:
        """The sample prompt as the port takes it (left-padded for a port whose limits say so)."""
        return self.prompt.padded(self.under_test.limits.batch.padding_side)

    @property
    def low_precision(self) -> bool:
        """Checked against HF in float64 under the profile's gates (bf16, fp16 or an integer scheme)."""
        return self.reference_model is not None

    @property
    def gate(self) -> Gate:
        return GATES[self.dtype] if self.scheme is None else quant_gate(self.scheme.name, self.options.backend)

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

    def compared_positions(self) -> tuple[torch.Tensor, torch.Tensor, bool]:
        """The valid ``(rows, positions)`` of the sample prompt whose logits HF's prefill kept, and
        whether they are all of its valid positions."""
        valid = self.prompt.attention_mask.bool()
        if self.theirs.positions is not None:
            kept = torch.zeros_like(valid)
            kept[:, self.theirs.positions] = True
            valid = valid & kept
        rows, positions = valid.nonzero(as_tuple=True)
        return rows, positions, self.theirs.positions is None

    @property
    def ours(self) -> PortPrefill:
        """The port's prefill of the sample prompt; the port's own error again if it raised there
        (so each check that needs it fails with that error, and the others still run)."""
        if isinstance(self.prefilled, Exception):
            raise self.prefilled
        return self.prefilled

    @property
    def is_runtime(self) -> bool:
        """Whether the port under test is this project's runtime (it declares its internals)."""
        return self.under_test.has(RUNTIME_INTERNALS)

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
        return ranges_recorded(self.port, self.ranges, self.is_runtime)

    def routing_active(self) -> contextlib.AbstractContextManager:
        """Record expert choices and pin HF at routing ties while a block runs (a MoE model on this
        runtime's PyTorch stages in float32: :mod:`..checks.routing`; nothing otherwise)."""
        return _routing(self.routing, self.model)

    def capped(self, max_seq: int) -> int:
        """``max_seq`` within the port's own ``limits.max_seq``."""
        return min(max_seq, self.under_test.limits.max_seq or max_seq)

    def static_length(self, needed: int) -> int:  # within the port's limits (its image profile's span too)
        return self.capped(max(needed, self.under_test.limits.shortest_static_length))

    def built(self, setup: PortSetup) -> contextlib.AbstractContextManager[Gemma4Port]:
        """Another instance of the port under test for ``setup`` (e.g. with a prefill chunk), every
        option of the run bound, closed after the block (:meth:`.port_under_test.PortUnderTest.built`)."""
        return self.under_test.built(setup)

    def close(self) -> None:
        """Done with the port under test: its ``close``."""
        self.port.close()


def ranges_recorded(port: Gemma4Port, ranges: dict[str, float], runtime: bool) -> contextlib.AbstractContextManager:
    """Record this runtime's overflow report into ``ranges`` while a block runs (nothing for another port)."""
    return recorded_ranges(port.runtime, ranges) if runtime else contextlib.nullcontext()


def decode_steps(config: Any, options: VerifyOptions) -> int:
    """The decode steps a run asks for: ``options.steps``, by default two windows and three past the
    prompt, at most 24."""
    return options.steps if options.steps is not None else min(2 * read_text_config(config).sliding_window + 3, 24)


def checked_for_config(config: Any, options: VerifyOptions) -> None:
    """A ``ValueError`` for ``options`` that a model of ``config`` cannot be judged in (asked before
    the model is built or loaded): a low-precision or integer profile of a mixture-of-experts model
    (not gated), or one split into shards (its routing is judged over a whole run)."""
    moe = config.get_text_config().enable_moe_block
    if moe and not options.float32:
        raise ValueError(
            f"the {options.quant or str(options.dtype).removeprefix('torch.')} profile of a mixture-of-experts model "
            "is not gated yet: in bf16 HF's own top-k differs from float64's on about half the tokens (51% on the "
            "26B-A4B geometry, from layer 0), which gates on stage errors cannot judge; use float32"
        )
    if moe and options.shard is not None:
        raise ValueError(f"shard {options.shard}: a mixture-of-experts model's routing is judged over a whole run")


def open_session(model: Any, options: VerifyOptions) -> Session:
    """Prepare a verification run of ``options.port`` on ``model``: the sample prompt it takes, the
    port sized for it plus the decode steps, and both prefills. The port's limits are read from the
    port built (:func:`~gemma4_static.ports.registry.declared_limits` first, where the factory
    declares them; else from a port built for one unpadded text row, built again if its limits ask for
    another prompt). In an integer profile this runtime and HF run in that scheme, calibrated on
    :data:`..numerics.quantized.CALIBRATION_SEEDS` sample prompts; another port runs a scheme of its
    ``limits.schemes`` in its own recipe, HF the same scheme through torchao. A recorded reference
    (``options.reference``) sees the sample plan first: it answers it, or records it."""
    checked_for_config(model.config, options)
    admit = admission(model, options.reference, options.port, options.profile, options.quant)
    reference_model = None if options.float32 else streamed(model)
    model = converted(model, options.dtype)
    wanted = decode_steps(model.config, options)
    factory = bound_builder(model, options)
    limits = declared_limits(port_factory(options.port)) or ONE_ROW
    plan = sample_plan(model.config, limits, wanted, options.max_seq)
    port = factory(plan[2])
    try:
        own = sample_plan(model.config, port.limits, wanted, options.max_seq)
        if own[1:] != plan[1:]:  # its own limits ask for another prompt or setup
            plan = own
            port.close()
            port = factory(plan[2])
        if options.dtype not in port.limits.dtypes:
            names = [str(name).removeprefix("torch.") for name in port.limits.dtypes]
            raise ValueError(f"port {options.port!r} runs {names}, not {options.dtype}")
        if options.scheme is not None and options.port != DEFAULT_PORT:
            refused_scheme(options.port, port.limits.schemes.names, options.scheme.name)
        admit(*plan)  # a recorded reference answers this plan (or records it)
        return _prepared(options, model, port, factory, plan, reference_model)
    except BaseException:
        port.close()
        raise


def _prepared(
    options: VerifyOptions,
    model: Any,
    port: Gemma4Port,
    factory: Any,
    plan: tuple[Prompt, int, PortSetup],
    reference_model: Any,
) -> Session:
    """The session of a built port: calibrated for an integer profile, both prefills run."""
    prompt, steps, setup = plan
    sides = prepared_scheme(options.scheme, port, model, setup)
    calibrates = sides.calibration is not None and sides.adopted is None
    under_test = PortUnderTest.of(port, factory, model.config, adopted=sides.adopted, calibrates=calibrates)
    runtime = under_test.has(RUNTIME_INTERNALS)
    moe = model.config.get_text_config().enable_moe_block
    eager_float32 = backend_named(options.backend).eager and options.dtype == torch.float32
    routing = RoutingLedger() if moe and runtime and eager_float32 else None
    ranges: dict[str, float] = {}
    log.info("prefilling the sample prompt (%d x %d tokens) on %s", *prompt.input_ids.shape, port.name)
    with ranges_recorded(port, ranges, runtime), _routing(routing, model):
        prefilled = port_prefill(port, prompt.padded(port.limits.batch.padding_side), keep_intermediates=True)
    log.info("prefilling the sample prompt on HF%s", "" if reference_model is None else " and HF float64")
    positions = kept_positions(prompt, model.config.get_text_config().vocab_size)
    reference = None if reference_model is None else hf_prefill(reference_model, prompt, positions)
    with _routing(routing, model):
        theirs = hf_prefill(sides.hf_model, prompt, positions)
    return Session(
        options, model, under_test, port, prompt, steps, setup, prefilled, theirs, sides,
        reference_model, reference, routing, ranges=ranges,
    )  # fmt: skip


def kept_positions(prompt: Prompt, vocab_size: int) -> torch.Tensor | None:
    """The sequence positions whose logits HF's sample prefill keeps: ``None`` (every one) within
    :data:`LOGITS_BUDGET`, else each row's last valid one and evenly spaced ones, sorted."""
    rows, length = prompt.input_ids.shape
    wanted = LOGITS_BUDGET // (rows * vocab_size)
    if wanted >= length:
        return None
    spread = torch.linspace(0, length - 1, max(wanted - rows, 2)).round().long()
    return torch.cat((spread, prompt.last_index)).unique()


def _routing(routing: RoutingLedger | None, model: Any) -> contextlib.AbstractContextManager:
    return contextlib.nullcontext() if routing is None else routing.active(model)
