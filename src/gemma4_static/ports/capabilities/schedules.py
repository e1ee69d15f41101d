"""A port's own prefill policy: how its runner splits a long prompt into chunks. It is part of the
port, declared and tested as its users run it (the schedules grid's ``policy`` cases, the long
context); a port without one prefills in one call."""

from __future__ import annotations

from . import Capability


class Schedules:
    """A port's prefill policy, optional in :class:`~..port.Gemma4Port`."""

    def prefill_schedule(self, length: int) -> list[int]:
        """The chunk lengths this port's own runner prefills ``length`` tokens in (its policy); by
        default one call."""
        return [length]


MIXIN = Schedules
PREFILL_POLICY = Capability("a prefill policy of its own", Schedules, ("prefill_schedule",))
CAPABILITIES = (PREFILL_POLICY,)
