"""The ``export`` check group: the graphs the port exports, each exported with ``torch.export`` and
replaying its eager output."""

from __future__ import annotations

from collections.abc import Iterator

from ...ports.capabilities.export_modules import EXPORT_MODULES
from ..checks import parity
from ..results.report import Row, merge
from ..session.port_calls import port_prefill
from ..session.session import Session
from . import CheckGroup


def export_rows(session: Session) -> Iterator[Row]:
    """The graphs the port exports, each exported with ``torch.export`` (after a prefill of the sample
    prompt and a decode step, whose inputs a port may capture) replaying its eager output."""
    port = session.port
    again = port_prefill(port, session.port_prompt)
    if isinstance(again, Exception):
        raise again
    port.decode(again.logits.argmax(dim=-1, keepdim=True))
    cases = port.export_cases()
    yield merge(parity.export_rows(cases), "export round-trip", f"{len(cases)} graphs, exported vs eager")


GROUP = CheckGroup(
    name="export",
    order=160,
    describe="the graphs the port exports, each exported with torch.export and replaying its eager output",
    rows=export_rows,
    needs=(EXPORT_MODULES,),
)
