"""The check groups of ``verify``, one module each (a group is its file: ``decode_masks.py`` is the
group ``decode-masks``), each declaring its :class:`CheckGroup` as ``GROUP``. :data:`GROUPS` is
the one table, in data-flow order, from which everything else is derived: ``verify --without``'s
choices, the groups a profile has rows in, the capabilities each needs or reads, the report's
coverage, the docs' table of groups, the ``new-port`` skeleton's test file and the pytest plugin's
items. Adding a group is one new file here, and nothing else.

A group reads the :class:`~..session.session.Session` (the port under test and HF's answers, shared)
and yields report rows; a check a port cannot answer is a SKIP row with the reason, never a pass."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ...ports.capabilities import Capability
from ..results.report import Row
from ..session.session import Session

PROFILE_KINDS = ("float32", "low precision", "integer")  # against HF float32; against float64 (bf16, fp16); a scheme
SHARDINGS = ("one", "every", "split")  # one shard runs it; every shard over its own groups; every shard a part
LANES = ("default", "nightly past tiny")  # its cost grows with the model: past the tiny models, run nightly


@dataclass(frozen=True)
class CheckGroup:
    """A check group: its ``name`` (its module's), its place in data-flow order (``order``), a
    one-line ``describe``, and ``rows(session)``, the rows it yields. ``needs``: the capabilities
    without which it compares nothing (a port lacking one gets one SKIP row saying so, and nothing is
    built); ``reads``: the capabilities it compares where a port has them (each a SKIP row where
    not). ``profiles``: the kinds of profile it has rows in (:data:`PROFILE_KINDS`); ``sharding``: how a
    split run runs it (:data:`SHARDINGS`, :mod:`..shards`); ``lane``: where the test lanes run it on
    the larger models (:data:`LANES`); ``minimum``: the report stages it compares that a green
    verdict needs compared at least (wherever it ran); ``real_size``: why a checkpoint's run leaves
    it out unless asked for every group (empty: it runs there too)."""

    name: str
    order: int
    describe: str
    rows: Callable[[Session], Iterable[Row]]
    needs: tuple[Capability, ...] = ()
    reads: tuple[Capability, ...] = ()
    profiles: tuple[str, ...] = PROFILE_KINDS
    sharding: str = "one"
    lane: str = "default"
    minimum: tuple[str, ...] = ()
    real_size: str = ""

    def __post_init__(self) -> None:
        for field, value, allowed in (("sharding", self.sharding, SHARDINGS), ("lane", self.lane, LANES)):
            if value not in allowed:
                raise ValueError(f"group {self.name!r}: {field} must be one of {allowed}, got {value!r}")
        unknown = sorted(set(self.profiles) - set(PROFILE_KINDS))
        if unknown or not self.profiles:
            raise ValueError(f"group {self.name!r}: profiles must be some of {PROFILE_KINDS}, got {self.profiles!r}")

    def runs_in(self, kind: str) -> bool:
        """Whether it has rows in a profile of ``kind`` (:data:`PROFILE_KINDS`)."""
        return kind in self.profiles


def _discovered() -> tuple[CheckGroup, ...]:
    """Every group module's ``GROUP``, in data-flow order; a ``ValueError`` where a module declares a
    group under another name than its own, or two groups share a place."""
    found = []
    for module in pkgutil.iter_modules(__path__):
        if module.name.startswith("_"):
            continue
        group = importlib.import_module(f"{__name__}.{module.name}").GROUP
        if group.name != module.name.replace("_", "-"):
            raise ValueError(f"{module.name}.py declares the group {group.name!r}: a group is named after its file")
        found.append(group)
    orders = [group.order for group in found]
    if len(set(orders)) != len(orders):
        raise ValueError(f"two check groups share a place in data-flow order: {sorted(orders)}")
    return tuple(sorted(found, key=lambda group: group.order))


GROUPS = _discovered()
BY_NAME = {group.name: group for group in GROUPS}
EVERY_SHARD = frozenset(group.name for group in GROUPS if group.sharding != "one")  # each shard runs (a part of) it
SPLIT_GROUP = next(group.name for group in GROUPS if group.sharding == "split")  # the one each shard runs a part of


def names(kind: str | None = None) -> tuple[str, ...]:
    """The groups' names in data-flow order (those with rows in a profile of ``kind``, where given)."""
    return tuple(group.name for group in GROUPS if kind is None or group.runs_in(kind))


def kind_of(dtype_name: str, quant: str | None) -> str:
    """The kind of a profile (:data:`PROFILE_KINDS`): ``float32``, ``low precision`` (bf16, fp16) or
    ``integer`` (a scheme over float32)."""
    return "integer" if quant is not None else "float32" if dtype_name == "float32" else "low precision"
