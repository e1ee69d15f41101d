"""Ports with a verification flow of their own that passes itself: around this runtime seen from
outside, correct (``PassesItself``) and with its logits at every position shifted
(``PassesItselfAllLogitsShifted``), where the suite's ``prefill logits`` rows fail beside the flow's "passed"."""

from __future__ import annotations

from gemma4_static.oracle.faults.host_faults import AllLogitsShifted, HostStagesPort
from gemma4_static.ports.capabilities.own_checks import OwnCheck


class PassesItself(HostStagesPort):
    def own_checks(self, prompt):
        return [OwnCheck("prefill", "[prefill] max |diff| 0.0: passed", stages=("prefill logits",))]


class PassesItselfAllLogitsShifted(AllLogitsShifted):
    own_checks = PassesItself.own_checks
