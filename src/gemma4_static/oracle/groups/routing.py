"""The ``routing`` check group: on a mixture-of-experts model, the expert choices of every run so far
against HF's (:mod:`..checks.routing`); no rows on a dense model."""

from __future__ import annotations

from collections.abc import Iterator

from ...ports.capabilities.runtime_internals import RUNTIME_INTERNALS
from ..results.report import Row, skip_row
from ..session.session import Session
from . import CheckGroup


def routing_rows(session: Session) -> Iterator[Row]:
    """Expert choices of every run so far vs HF's: decided disagreements fail, ties are pinned and
    counted (:mod:`..checks.routing`). No rows without a MoE block; one SKIP row where the choices
    cannot be seen (another port, backend or profile)."""
    if session.routing is not None:
        yield from session.routing.rows()
    elif session.config.get_text_config().enable_moe_block:
        reason = (
            "recorded on this runtime's PyTorch stages in float32 only: elsewhere the router runs inside a "
            "program, so a routing tie (HF margin <= 1e-4) cannot be pinned and may move the stages after it"
        )
        yield skip_row("routing", "expert choices vs HF", reason)


GROUP = CheckGroup(
    name="routing",
    order=140,
    describe="on a mixture-of-experts model, the expert choices of every run so far against HF's: decided "
    "disagreements fail, ties are pinned and counted",
    rows=routing_rows,
    reads=(RUNTIME_INTERNALS,),
)
