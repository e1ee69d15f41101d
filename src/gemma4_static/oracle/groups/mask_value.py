"""The ``mask-value`` check group: the port's additive mask value against the score range the model's
layers can produce over the keys of its static length (:func:`..numerics.parity_numerics.mask_value_check`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from ...ports.capabilities.host_stages import MASK_VALUE
from ..numerics.parity_numerics import hf_score_bound, mask_value_check
from ..results.report import Row
from ..session.session import Session
from . import CheckGroup


def mask_value_rows(session: Session) -> Iterator[Row]:
    """The port's additive mask value against the score range the model's layers can produce, over
    the keys of its static length (:func:`..numerics.parity_numerics.mask_value_check`)."""
    port = session.port
    rows = mask_value_check(port.mask_fill_value(), session.dtype, session.setup.max_seq, hf_score_bound(session.model))
    yield rows[0]
    if port.limits.batch.padding_side is None:  # no padding, so no query row all masked for an overflow to turn to NaN
        yield dataclasses.replace(rows[1], skipped=f"{port.name} takes no padding: no query row is ever all masked")
    else:
        yield rows[1]


GROUP = CheckGroup(
    name="mask-value",
    order=80,
    describe="the port's additive mask value against the score range the model's layers can produce, and "
    "whether an all-masked row stays finite",
    rows=mask_value_rows,
    needs=(MASK_VALUE,),
)
