"""A port's own verification flow (its own idea of parity), run by the suite on the sample prompt
and shown beside the suite's verdict, never gating it."""

from __future__ import annotations

from dataclasses import dataclass

from ..core import not_exposed
from ..prompt import Prompt
from . import Capability


@dataclass(frozen=True)
class OwnCheck:
    """One step of a port's own verification flow and what it said: ``said`` is its verdict in its
    own words (e.g. the lines it printed), ``raised`` its error where the step raised; ``stages`` the
    suite's stages that judge the same thing (shown beside it)."""

    step: str
    said: str
    stages: tuple[str, ...] = ()
    raised: str = ""


class OwnChecks:
    """A port's own verification flow, optional in :class:`~..port.Gemma4Port`."""

    def own_checks(self, prompt: Prompt) -> list[OwnCheck]:
        """The port's own verification flow run on ``prompt`` (the sample prompt, as the port takes
        it), one :class:`OwnCheck` per step: shown beside the suite's verdict, never gating it."""
        raise not_exposed(self, OWN_CHECKS.name)


MIXIN = OwnChecks
OWN_CHECKS = Capability("a verification flow of its own", OwnChecks, ("own_checks",))
CAPABILITIES = (OWN_CHECKS,)
