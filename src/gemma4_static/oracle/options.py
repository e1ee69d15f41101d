"""Every option of a run, in one frozen object validated when it is made: :class:`VerifyOptions`.

The command line (``verify``, ``record``, ``fuzz``, ``--self-test``), the pytest plugin and the
Python API each build one the same way and hand it over whole (hypothesis' ``settings`` is the
model); nothing downstream takes an option on its own. The port's own options (the backend and the
mask fill of this project's runtime, the integer scheme) are bound once, where the run makes port
instances (:class:`~.session.port_under_test.PortUnderTest`), so no check group can drop one.

The check groups are the modules of :mod:`.groups` (a group is its file: ``decode_masks.py`` is
``decode-masks``); their names are read from that folder without importing them
(:mod:`.group_folder`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property

import torch

from ..backends import backend_named
from ..ports.registry import DEFAULT_PORT, declared_limits, port_factory
from ..ports.static import StaticRuntimePort
from ..quant import Scheme, parse_scheme
from .group_folder import group_names
from .numerics.gates import GATES, quant_gate
from .references.reference_folder import Reference
from .shards import Shard

PROFILES = (torch.float32, *GATES)  # float32 is checked against HF float32, the others against float64
# port calls the schedules grid runs by default: tiny's grid whole, E2B's in minutes (without chunks of 1)
GRID_BUDGET = 3000


def _positive(name: str, value: object, *, optional: bool) -> None:
    if value is None and optional:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        expected = "a positive int or None" if optional else "a positive int"
        raise ValueError(f"{name} must be {expected}, got {value!r}")


@dataclass(frozen=True)
class VerifyOptions:
    """One run's options. The port: ``port`` (a built-in name, ``package.module:factory`` or
    ``path/to/file.py:factory``) and this project's runtime's own options, ``backend`` and
    ``mask_value`` (the additive fill of a forbidden key; ``None``: its default per dtype). The
    profile: ``dtype``, or ``quant``, an integer scheme over float32. The shapes: ``max_seq`` (the
    sample setup's static length; ``None``: the sample prompt plus ``steps`` plus one) and ``steps``
    (decode and generation steps; ``None``: ``2 * window + 3``, at most 24). What runs: ``groups``
    (names of the check groups, ``None``: every one), ``schedules_budget`` (port calls the schedules
    grid may spend), ``until_failure`` (no group after the first with a failed row: the self-test).
    Where HF's answers come from: ``reference`` (a recorded reference; ``None``: HF live), and
    ``shard``, the part of a split run this process runs."""

    port: str = DEFAULT_PORT
    dtype: torch.dtype = torch.float32
    quant: str | None = None
    backend: str = "torch"
    mask_value: float | None = None
    max_seq: int | None = None
    steps: int | None = None
    groups: tuple[str, ...] | None = None
    schedules_budget: int = GRID_BUDGET
    until_failure: bool = False
    reference: Reference | None = None
    shard: Shard | None = None

    def __post_init__(self) -> None:
        if self.dtype not in PROFILES:
            raise ValueError(f"dtype must be one of {list(PROFILES)}, got {self.dtype}")
        _positive("max_seq", self.max_seq, optional=True)
        _positive("steps", self.steps, optional=True)
        _positive("schedules_budget", self.schedules_budget, optional=False)
        if self.groups is not None:
            known = group_names()
            unknown = sorted(set(self.groups) - set(known))
            if unknown or not isinstance(self.groups, tuple):
                raise ValueError(f"groups has unknown names {unknown}; expected a tuple of some of {list(known)}")
        fill = self.mask_value
        if fill is not None and (not isinstance(fill, int | float) or isinstance(fill, bool) or math.isnan(fill)):
            raise ValueError(f"mask_value must be a number or None, got {self.mask_value!r}")
        if self.shard is not None and not isinstance(self.shard, Shard):
            raise TypeError(f"shard must be a Shard, got {self.shard!r}")
        backend = backend_named(self.backend)  # a ValueError naming the known ones (or the extra a backend needs)
        factory = port_factory(self.port)  # a ValueError naming a port that cannot be found
        if factory is not StaticRuntimePort and (backend.name != "torch" or self.mask_value is not None):
            raise ValueError(
                f"backend and mask_value are options of the gemma4-static runtime, not of port {self.port!r}"
            )
        limits = declared_limits(factory)  # else checked on the port built (open_session)
        if self.quant is not None:
            self.scheme  # noqa: B018 (a ValueError for a scheme this port, backend or gate does not have)
        if limits is not None and self.dtype not in limits.dtypes:
            names = [str(dtype).removeprefix("torch.") for dtype in limits.dtypes]
            raise ValueError(f"port {self.port!r} runs {names}, not {self.dtype}")

    @cached_property
    def scheme(self) -> Scheme | None:
        """The integer scheme ``quant`` names, over float32 (``None`` without): for this runtime
        fake-quantized PyTorch stages, or XNNPACK's quantized programs on an ExecuTorch backend; for
        another port a scheme it declares in ``limits.schemes`` (checked on the port built where its
        factory declares no limits), in its own recipe. A ``ValueError`` for one that is not gated."""
        if self.quant is None:
            return None
        scheme = parse_scheme(self.quant)
        if self.dtype != torch.float32:
            raise ValueError(f"quant runs over float32, not {str(self.dtype).removeprefix('torch.')}")
        backend = backend_named(self.backend)
        if self.port == DEFAULT_PORT and backend.name != "torch":
            backend.quantization(None, self.quant)  # a ValueError naming what it cannot run
        limits = declared_limits(port_factory(self.port))
        if limits is not None and self.port != DEFAULT_PORT:
            refused_scheme(self.port, limits.schemes.names, self.quant)
        quant_gate(scheme.name, self.backend)  # a ValueError for a scheme without gates there
        return scheme

    @property
    def profile(self) -> str:
        """The profile as a report names it: ``float32``, ``bfloat16``, ``8da4w+emb8 over float32``."""
        return str(self.dtype).removeprefix("torch.") if self.quant is None else f"{self.quant} over float32"

    @property
    def float32(self) -> bool:
        """Whether the run is judged against HF in float32 (else against HF in float64, gated)."""
        return self.dtype == torch.float32 and self.quant is None

    def as_dict(self) -> dict[str, object]:
        """The options as strict-JSON values, as a report records them (the reference by its folder)."""
        return {
            "port": self.port,
            "dtype": str(self.dtype).removeprefix("torch."),
            "quant": self.quant,
            "backend": self.backend,
            "mask_value": self.mask_value,
            "max_seq": self.max_seq,
            "steps": self.steps,
            "groups": None if self.groups is None else list(self.groups),
            "schedules_budget": self.schedules_budget,
            "until_failure": self.until_failure,
            "reference": None if self.reference is None else str(self.reference.folder),
            "shard": None if self.shard is None else str(self.shard),
        }

    def runs(self, group: str) -> bool:
        """Whether check group ``group`` is among this run's."""
        return self.groups is None or group in self.groups

    def without(self, *groups: str) -> VerifyOptions:
        """These options with ``groups`` left out."""
        chosen = group_names() if self.groups is None else self.groups
        return replace(self, groups=tuple(name for name in chosen if name not in groups))


def refused_scheme(port: str, schemes: tuple[str, ...], quant: str) -> None:
    """A ``ValueError`` when ``port`` (declaring ``schemes``) does not run integer scheme ``quant``."""
    if quant not in schemes:
        raise ValueError(f"port {port!r} runs the integer schemes {list(schemes)}, not {quant!r}")
