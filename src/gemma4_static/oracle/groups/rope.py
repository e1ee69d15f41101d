"""The ``rope`` check group: the port's RoPE tables per layer type and dtype against HF's
``Gemma4TextRotaryEmbedding`` over positions ``[0, 4100)`` (within the port's ``max_seq``), and the
tables it builds for a decode step at positions around the window edges and at its last position."""

from __future__ import annotations

from collections.abc import Iterator

import torch

from ...ports import Gemma4Port, PortSetup
from ...ports.capabilities.host_stages import DECODE_ROPE, ROPE
from ..checks import parity
from ..references.hf import hf_rope
from ..results import tolerances
from ..results.report import Row, merge_by
from ..session.port_calls import guarded
from ..session.session import Session
from . import CheckGroup
from ._shared import decode_positions


def rope_rows(session: Session) -> Iterator[Row]:
    """The port's RoPE per layer type and dtype vs ``Gemma4TextRotaryEmbedding``, positions ``[0, 4100)``
    (up to the port's ``max_seq``), and its decode-step RoPE (:func:`decode_rope_rows`)."""
    length = session.capped(tolerances.ROPE_POSITIONS)
    positions = torch.arange(length)[None]
    with session.built(PortSetup(length)) as port:  # a static port's tables are max_seq long
        for dtype in tolerances.ROPE:
            rows = lambda dtype=dtype: parity.rope_rows(session.config, port.rope, positions, dtype)  # noqa: E731
            yield from guarded("RoPE", str(dtype).removeprefix("torch."), rows)
        capacity = port.limits.capacity(length)
        yield from guarded("RoPE decode", "per layer type", lambda: decode_rope_rows(session, port, capacity))


def decode_rope_rows(session: Session, port: Gemma4Port, capacity: int) -> Iterator[Row]:
    """``port``'s decode-step RoPE (it holds ``capacity`` tokens) at positions around the window edges
    and at its last position vs ``Gemma4TextRotaryEmbedding`` there, per layer type and dtype."""
    window, last = session.window, capacity - 1
    positions = sorted({*(p for p in decode_positions(window) if p <= last), last})
    for dtype in tolerances.ROPE:
        name = str(dtype).removeprefix("torch.")
        rows = []
        for position in positions:
            ours = port.decode_rope(position, dtype)
            theirs = {
                layer_type: tuple(table[:, :1] for table in pair)
                for layer_type, pair in hf_rope(session.config, torch.tensor([[position]]), dtype=dtype).items()
            }
            rows += parity.rope_pairs_rows("RoPE decode", name, ours, theirs, dtype)
        yield from merge_by(rows, lambda row, name=name: f"{row.check} (positions {positions})")


GROUP = CheckGroup(
    name="rope",
    order=70,
    describe="the port's RoPE tables per layer type and dtype against HF's rotary embedding over positions "
    "[0, 4100), and its decode step's tables around the window edges",
    rows=rope_rows,
    reads=(ROPE, DECODE_ROPE),
)
