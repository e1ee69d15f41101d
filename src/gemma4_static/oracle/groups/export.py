"""The ``export`` check group: the graphs the port exports, each exported with ``torch.export`` and
replaying its eager output."""

from __future__ import annotations

from collections.abc import Iterator

from ...ports.capabilities.export_modules import EXPORT_MODULES
from ..checks import parity
from ..results.report import Row, merge
from ..session.session import Session
from . import CheckGroup
from ._shared import after_a_decode_step


def export_rows(session: Session) -> Iterator[Row]:
    """The graphs the port exports, each exported with ``torch.export`` (after a prefill of the sample
    prompt and a decode step, whose inputs a port may capture) replaying its eager output."""
    after_a_decode_step(session)
    cases = session.port.export_cases()
    yield merge(parity.export_rows(cases), "export round-trip", f"{len(cases)} graphs, exported vs eager")


GROUP = CheckGroup(
    name="export",
    order=160,
    describe="the graphs the port exports, each exported with torch.export and replaying its eager output",
    rows=export_rows,
    needs=(EXPORT_MODULES,),
)
