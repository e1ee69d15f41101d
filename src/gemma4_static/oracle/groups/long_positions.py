"""The ``long-positions`` check group: the port's logits at the far end of a long context against
HF's, where RoPE's angles are largest.

The ``rope`` group compares the tables a port's ``rope`` hook returns. A port whose programs get
their angles another way (positions cast to a half-precision dtype on the way in, a table rebuilt
in low precision inside a program, an angle computed as ``(p * inv_freq)`` in bfloat16) passes it
and the short prompts of every other group, and goes wrong only where positions are long. This
group reads nothing of the port but its logits: one row of ``max_seq`` = 4100 tokens (within the
port's limits; a port that needs an image gets its profile's image first), the port's own prefill
policy over all but the last ``LONG_STEPS + 1`` slots it holds, then ``LONG_STEPS`` decode steps;
the last prompt token's logits, every chunk end's and every step's against HF's forward over the
same tokens, judged as one case of the schedules grid (:mod:`..episodes.scores`)."""

from __future__ import annotations

from collections.abc import Iterator

from ...ports import PortSetup
from ...ports.capabilities.image_profiles import IMAGE_PROFILES
from ...ports.capabilities.schedules import PREFILL_POLICY
from ..episodes.cases import NO_PROFILE, Case, image_prefix, judged_case, one_row_prompt
from ..episodes.scores import hf_references, length_row, scored_in_profile, sqnr_row
from ..results import tolerances
from ..results.report import Row, skip_row
from ..session.sample_plan import SEEDS
from ..session.session import Session
from . import CheckGroup

STAGE = "long positions"
LONG_STEPS = 2  # decode steps after the long prompt: positions the decode path places itself


def long_position_rows(session: Session) -> Iterator[Row]:
    """One row: the long prompt's case, its worst position against its tolerance (float32) or gate
    (a low-precision profile), the first diverging position named."""
    prefix = image_prefix(session)
    if prefix is None:
        yield skip_row(STAGE, "logits", NO_PROFILE.format(port=session.port.name))
        return
    max_seq = session.capped(tolerances.ROPE_POSITIONS)
    base = one_row_prompt(session, max_seq, prefix, SEEDS["long positions"])
    with session.built(PortSetup(max_seq, image_slots=base.image_slots)) as port:
        length = port.limits.capacity(max_seq) - LONG_STEPS
        chunks = port.prefill_schedule(length)
        if session.low_precision:
            score = scored_in_profile(session, base)
        else:  # the float32 tolerance alone: HF's token-by-token decode of 4100 tokens is not asked
            score = hf_references(session, base, token_by_token=False)
        case = Case(length, "policy", tuple(chunks), LONG_STEPS, None)
        outcome = judged_case(port, base, case, score)
    yield (sqnr_row if session.low_precision else length_row)(length, [(case, outcome)], STAGE)


GROUP = CheckGroup(
    name="long-positions",
    order=130,
    describe="the port's logits at the far end of a 4100-token context (its own prefill policy, then two decode "
    "steps) against HF's forward, reading nothing but its logits",
    rows=long_position_rows,
    reads=(PREFILL_POLICY, IMAGE_PROFILES),
    lane="nightly past tiny",
    real_size="a 4100-token context prefilled by the port and by HF, its logits at every position against "
    "HF's: 4.3 GB of float64 logits at a vocabulary of 262,144",
)
