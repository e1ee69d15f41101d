"""The ``layers`` check group: every decoder layer's output (in groups of one 4:1 period), every
producing layer's K/V after the prefill and the prefill logits (at each row's last token, from a
plain prefill too, and at every valid position) against HF's (in a low-precision profile against HF
in float64, HF's own figures in the profile beside); every value the prefill returned finite, its
padded positions included (:mod:`..checks.finite`)."""

from __future__ import annotations

from collections.abc import Iterator
from operator import attrgetter

import torch

from ...ports.capabilities.host_stages import KV_CACHE
from ..checks import parity
from ..checks.finite import finite_row, returned_tensors
from ..numerics import parity_numerics
from ..references.hf import paired_hidden_states
from ..results.figures import layer_points, position_points
from ..results.report import Row, merge, merge_by
from ..session.port_calls import PLAIN, guarded, plain_prefill_logits
from ..session.session import LAYER_GROUP, Session
from . import CheckGroup
from ._shared import kv_rows, kv_rows_vs_float64

FINITE = "every value returned finite, padding included"


def layer_rows(session: Session) -> Iterator[Row]:
    """Every decoder layer's output (grouped), every producing layer's K/V and the prefill logits;
    every value the sample prompt's prefill returned finite."""
    yield from low_precision_rows(session) if session.low_precision else float32_rows(session)
    yield from finite_rows(session)


def finite_rows(session: Session) -> list[Row]:
    """Every value the sample prompt's prefill returned finite, padding included (its error where it raised)."""
    return guarded(
        "prefill logits", FINITE, lambda: [finite_row("prefill logits", FINITE, returned_tensors(session.ours))]
    )


def float32_rows(session: Session) -> Iterator[Row]:
    """In float32: each against HF float32's."""
    yield from guarded("decoder layers", "hidden states", lambda: hidden_state_rows(session))
    yield from guarded("KV cache", "K/V of every producing layer", lambda: kv_rows(session))
    hf_logits = session.theirs.logits_at(torch.arange(session.prompt.input_ids.shape[0]), session.prompt.last_index)
    yield from parity.logits_rows(session.ours.logits, hf_logits, session.dtype)
    yield from guarded("prefill logits", PLAIN, lambda: [plain_prefill_row(session, hf_logits)])
    yield from guarded("prefill logits", "every valid position", lambda: [all_logits_row(session)])


def plain_prefill_row(session: Session, hf_logits: torch.Tensor) -> Row:
    """The sample prompt's last-token logits from a plain prefill (no intermediates asked) vs HF's."""
    logits = plain_prefill_logits(session.port, session.port_prompt)
    return parity.stage_row("prefill logits", PLAIN, logits, hf_logits, session.dtype)


def positions_check(session: Session, counted: bool = False) -> tuple[torch.Tensor, torch.Tensor, str]:
    """The valid ``(rows, positions)`` whose logits are compared and the check naming them: every
    valid position (``counted``: with how many), or those of them HF's prefill kept (a real
    vocabulary: :func:`..session.session.kept_positions`)."""
    rows, positions, every = session.compared_positions()
    if not every:
        return rows, positions, f"{len(rows)} of {int(session.prompt.attention_mask.sum())} valid positions"
    return rows, positions, f"every valid position ({len(rows)})" if counted else "every valid position"


def all_logits_row(session: Session) -> Row:
    """The logits at every valid position (what scoring and perplexity read) vs HF's."""
    rows, positions, check = positions_check(session)
    ours = session.exposed(session.ours.all_logits, "the logits at every position")
    if ours.shape[:2] != session.prompt.attention_mask.shape:
        return parity.compare("prefill logits", check, ours, session.theirs.logits, 0.0)
    mine, theirs = ours[rows, positions], session.theirs.logits_at(rows, positions)
    row = parity.stage_row("prefill logits", check, mine, theirs, session.dtype)
    errors = (mine.double() - theirs.double()).abs().amax(dim=-1).tolist()
    session.figures["positions"] = position_points(torch.stack((rows, positions), 1).tolist(), errors, row.tolerance)
    return row


def hidden_state_rows(session: Session) -> Iterator[Row]:
    valid = session.prompt.attention_mask.bool()
    states = session.exposed(session.ours.hidden_states, "hidden states")
    layers = parity.hidden_state_rows(states, session.theirs, valid, session.dtype)[1:]
    session.figures["layers"] = layer_points([[row] for row in layers])
    for start in range(0, len(layers), LAYER_GROUP):
        group = layers[start : start + LAYER_GROUP]
        yield merge(group, "decoder layers", f"layers {start}-{start + len(group) - 1} hidden states")


def low_precision_rows(session: Session) -> Iterator[Row]:
    """In a low-precision profile: each against HF float64's, HF's own figures in the profile beside."""
    gate, valid, prompt = session.gate, session.prompt.attention_mask.bool(), session.prompt
    yield from guarded("decoder layers", "hidden states vs float64", lambda: hidden_state_rows_vs_float64(session))
    yield from kv_rows_vs_float64(session, "KV cache", session.port, prompt, "")
    rows_index = torch.arange(valid.shape[0])
    reference = session.reference.logits_at(rows_index, prompt.last_index)
    hf = session.theirs.logits_at(rows_index, prompt.last_index)
    check = "last valid token per row"
    yield from parity_numerics.metric_rows("prefill logits", check, session.ours.logits, hf, reference, gate)
    yield from guarded(
        "prefill logits",
        PLAIN,
        lambda: parity_numerics.metric_rows(
            "prefill logits", PLAIN, plain_prefill_logits(session.port, session.port_prompt), hf, reference, gate
        ),
    )
    yield parity_numerics.sample_gap_row("prefill logits", reference, gate)
    rows, positions, every = positions_check(session, counted=True)
    yield from guarded(
        "prefill logits",
        every,
        lambda: parity_numerics.token_rows(
            "prefill logits",
            every,
            session.exposed(session.ours.all_logits, "the logits of every position")[rows, positions],
            session.theirs.logits_at(rows, positions),
            session.reference.logits_at(rows, positions),
            gate,
            lambda index: f"row {rows[index]} position {positions[index]}",
        ),
    )


def hidden_state_rows_vs_float64(session: Session) -> Iterator[Row]:
    """Each layer's hidden states against float64, merged per group of :data:`LAYER_GROUP` layers."""
    gate, valid = session.gate, session.prompt.attention_mask.bool()
    states = session.exposed(session.ours.hidden_states, "hidden states")
    ours = paired_hidden_states(states, session.reference, valid)
    layers = [
        parity_numerics.metric_rows("decoder layers", f"layer {index}", mine, hf[valid], reference, gate)
        for index, ((mine, reference), hf) in enumerate(zip(ours[1:], session.theirs.layer_outputs[1:], strict=True))
    ]
    session.figures["layers"] = layer_points(layers)
    for start in range(0, len(layers), LAYER_GROUP):
        group = [row for rows in layers[start : start + LAYER_GROUP] for row in rows]
        yield from merge_by(group, attrgetter("metric"), f"layers {start}-{start + LAYER_GROUP - 1} hidden states")


GROUP = CheckGroup(
    name="layers",
    order=90,
    describe="every decoder layer's hidden states, every producing layer's K/V after the prefill, and the "
    "prefill logits (last token, plain prefill, every valid position; every value returned finite)",
    rows=layer_rows,
    reads=(KV_CACHE,),
    minimum=("prefill logits",),
)
