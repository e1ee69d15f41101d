"""The ``overflow`` check group: the largest activation of every stage and layer over the groups run
before it, with its headroom in the profile's dtype (this runtime on its PyTorch stages: the
ExecuTorch programs' activations are not observable, :mod:`..numerics.overflow`)."""

from __future__ import annotations

from collections.abc import Iterator

from ...backends import backend_named
from ...ports.capabilities.runtime_internals import RUNTIME_INTERNALS
from ..numerics import overflow
from ..results.report import Row
from ..session.session import Session
from . import CheckGroup


def overflow_rows(session: Session) -> Iterator[Row]:
    """The largest activation of every stage and layer over the prefill and decode, with headroom
    (PyTorch backend: the ExecuTorch programs' activations are not observable, see :mod:`..numerics.overflow`)."""
    if backend_named(session.options.backend).eager:
        yield from overflow.overflow_rows(session.ranges, session.dtype)


GROUP = CheckGroup(
    name="overflow",
    order=150,
    describe="the largest activation of every stage and layer over the groups run before it, with its headroom "
    "in the profile's dtype",
    rows=overflow_rows,
    needs=(RUNTIME_INTERNALS,),
    sharding="every",
)
