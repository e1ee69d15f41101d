"""The ``prefill-masks`` group asks a port only the layouts it takes: a port of one unpadded row gets
each length once, unpadded (the default port's 24 layouts are its group pair's)."""

from __future__ import annotations

import dataclasses

from gemma4_static.oracle.flow.verify import verify
from gemma4_static.oracle.options import VerifyOptions
from gemma4_static.ports import BatchLimits
from gemma4_static.ports.static import StaticRuntimePort


class OneUnpaddedRow(StaticRuntimePort):
    """This runtime declared as taking one row without padding."""

    limits = dataclasses.replace(StaticRuntimePort.limits, batch=BatchLimits(max_batch=1, padding_side=None))


def test_a_port_of_one_unpadded_row_is_asked_each_length_once_unpadded(tiny_model):
    rows = verify(tiny_model, VerifyOptions(port=f"{__name__}:OneUnpaddedRow", groups=("prefill-masks",))).rows
    checks = [row.check for row in rows]
    expected = [
        f"{kind} {implementation} (3 layouts)"
        for implementation in ("eager", "sdpa")
        for kind in ("sliding_attention", "full_attention")
    ]
    assert sorted(checks) == sorted(expected), checks
    assert all(row.compared and not row.failed for row in rows), rows
