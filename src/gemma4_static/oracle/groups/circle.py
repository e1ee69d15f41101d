"""The ``circle`` check group: the graphs a port ships as Circle files, converted by TICO as its
toolchain converts them and run in ONE's runtime (onert), each against its module: as shipped, with
onert's known limits worked around, and with TICO's known bug fixed
(:func:`~..checks.circle.shipped_rows`); in an integer profile, whether each converts (INFO:
:func:`~..checks.circle.conversion_rows`). Without the ``circle`` extra, one SKIP row naming it."""

from __future__ import annotations

from collections.abc import Iterator

from ...circle.graphs import circle_missing
from ...ports.capabilities.export_modules import CIRCLE_GRAPHS
from ..checks import circle
from ..results.report import Row, skip_row
from ..session.session import Session
from . import CheckGroup
from ._shared import after_a_decode_step


def circle_group_rows(session: Session) -> Iterator[Row]:
    """The port's Circle graphs (captured by a prefill of the sample prompt and a decode step) through
    TICO and onert, three rows each."""
    missing = circle_missing()
    if missing is not None:
        yield skip_row(circle.STAGE, "the rest of this group", f"Circle graphs need {missing}")
        return
    after_a_decode_step(session)
    if session.scheme is not None:
        yield from circle.conversion_rows(session.port.circle_cases(), session.scheme.name)
        return
    yield from circle.shipped_rows(session.port.circle_cases())


GROUP = CheckGroup(
    name="circle",
    order=165,
    describe="the graphs the port ships as Circle files, converted by TICO and run in onert against their modules",
    rows=circle_group_rows,
    needs=(CIRCLE_GRAPHS,),
)
