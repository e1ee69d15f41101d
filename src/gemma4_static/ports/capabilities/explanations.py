"""A port's documented divergences: a failing report row the port explains is an expected failure
(XFAIL) with its reason, in every check group and in the fuzzer; a failure nobody documented is a
failure. An explanation must hold only for the rows it is written for."""

from __future__ import annotations

from typing import Any

from . import Capability


class Explanations:
    """A port's documented divergences, optional in :class:`~..port.Gemma4Port`."""

    def explain(self, row: Any) -> str | None:
        """The port's own documented reason for a failing report row (a known divergence, shown as
        an expected failure), or ``None``: a failure nobody documented is a failure."""
        return None


MIXIN = Explanations
EXPLANATIONS = Capability(
    "explanations of its known divergences",
    Explanations,
    ("explain",),
    uses="every check group's failing rows and the fuzzer's divergences (an explained one is an XFAIL)",
)
CAPABILITIES = (EXPLANATIONS,)
