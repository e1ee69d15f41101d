"""This runtime seen from outside with a legitimate difference from HF, declared or not
(:class:`~gemma4_static.ports.limits.Contracts`): its static length counting the decode's slot
(``ReservesSlot``: built for ``max_seq``, it holds ``max_seq - 1`` tokens), its cache holding every
generated token after ``generate`` (``LeavesAll``); each ``...Undeclared`` the same port not saying
so, and ``ClaimsLeavesAll`` this runtime claiming the second while its cache holds one fewer. A
declared difference passes every judge; an undeclared or false one fails."""

from __future__ import annotations

import dataclasses

from gemma4_static.oracle.faults.port_faults import WrappedRuntimePort
from gemma4_static.ports.limits import Contracts

PLAIN = WrappedRuntimePort.limits


def declaring(**contracts) -> object:
    return dataclasses.replace(PLAIN, contracts=Contracts(**contracts))


class ReservesSlot(WrappedRuntimePort):
    limits = declaring(reserves_decode_slot=True)

    def __init__(self, model, setup) -> None:
        super().__init__(model, dataclasses.replace(setup, max_seq=setup.max_seq - 1))


class ReservesSlotUndeclared(ReservesSlot):
    limits = PLAIN


class LeavesAll(WrappedRuntimePort):
    limits = declaring(generate_leaves="all")

    def generate(self, prompt, *, max_new_tokens, eos_token_id=None):
        tokens = super().generate(prompt, max_new_tokens=max_new_tokens, eos_token_id=eos_token_id)
        self.decode(tokens[:, -1:])  # its cache holds the last generated token too
        return tokens


class LeavesAllUndeclared(LeavesAll):
    limits = PLAIN


class ClaimsLeavesAll(WrappedRuntimePort):
    limits = declaring(generate_leaves="all")


class ShortReservesSlot(ReservesSlot):
    """``ReservesSlot`` holding at most 64 positions (a long context the tiny model runs fast)."""

    limits = dataclasses.replace(ReservesSlot.limits, max_seq=64)


class ShortReservesSlotUndeclared(ShortReservesSlot):
    limits = dataclasses.replace(PLAIN, max_seq=64)
