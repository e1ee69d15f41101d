"""The ``long-positions`` group's plan: the context it asks of a port, what it compares, when it
cannot run. The fault only it catches (positions cast to float16 inside a port whose ``rope`` hook
is exact) is the self-test lane's (``test_fuzz_power.py``)."""

from __future__ import annotations

import pytest
import torch

from gemma4_static.oracle.flow.verify import verify
from gemma4_static.oracle.groups.long_positions import LONG_STEPS, STAGE
from gemma4_static.oracle.options import VerifyOptions
from gemma4_static.oracle.results import tolerances
from tests.unit.ports.port_adapters import ShortContextPort

ADAPTERS = "tests.unit.ports.port_adapters"


def test_the_group_fills_the_context_the_port_holds_and_compares_it(tiny_model):
    """Within the port's ``max_seq`` (64 here, 4100 where it holds that many): the prompt fills all but
    the two decode steps' slots (the decode path places the last positions itself), and the row
    compares them."""
    assert tolerances.ROPE_POSITIONS == 4100
    rows = verify(tiny_model, VerifyOptions(port=f"{ADAPTERS}:ShortContextPort", groups=("long-positions",))).rows
    assert [row.stage for row in rows] == [STAGE]
    (row,) = rows
    assert LONG_STEPS == 2
    assert row.check.startswith("prompt 62: 1 schedule, chunk ends, last token, 2 decode steps")
    assert row.compared and 0 <= row.value <= row.tolerance < 1e-3, row


def test_a_port_that_needs_an_image_without_a_profile_is_skipped_with_the_reason(tiny_model):
    port = f"{ADAPTERS}:NeedsImageNoProfilePort"
    groups = ("chunked-prefill", "schedules", "long-positions")
    rows = verify(tiny_model, VerifyOptions(port=port, groups=groups)).rows
    stages = [("chunked prefill", True), ("schedules", True), (STAGE, True)]
    assert [(row.stage, row.skipped != "") for row in rows] == stages
    assert all("needs an image in every prompt" in row.skipped for row in rows)
    assert (rows[0].check, rows[0].skipped) == (
        "chunks of W + 1",
        "needs an image, no profile needs an image in every prompt",
    )
    assert (rows[1].check, rows[1].skipped) == (
        "grid",
        "needs an image, no profile needs an image in every prompt and declares no image profile to put one"
        " before the text",
    )
    assert (rows[2].check, rows[2].skipped) == ("logits", rows[1].skipped)  # the long prompt's row: the same reason


def test_the_long_prompt_leaves_a_reserved_decode_slot_free(tiny_model):
    """A port whose static length counts the decode's slot holds one token fewer: declared, the long
    prompt is one shorter and passes; undeclared, the prompt overfills it and the row fails with its error."""
    contracts = "tests.unit.oracle.contract_ports"
    (declared,) = verify(
        tiny_model, VerifyOptions(port=f"{contracts}:ShortReservesSlot", groups=("long-positions",))
    ).rows
    assert declared.check.startswith("prompt 61: 1 schedule") and declared.compared and not declared.failed, declared
    port = f"{contracts}:ShortReservesSlotUndeclared"
    (undeclared,) = verify(tiny_model, VerifyOptions(port=port, groups=("long-positions",))).rows
    assert undeclared.failed and undeclared.check.startswith("prompt 62: 1 schedule"), undeclared
    assert "raised ValueError: cache is full: rows [0] already hold max_seq=63 tokens" in undeclared.check


class ShortContextDecodeOff(ShortContextPort):
    """The short-context port whose decode steps come back 1e-3 off everywhere: past the tolerance
    (5.4e-4 here), within the reach where the grid would ask its second reference."""

    def decode(self, next_ids):
        return super().decode(next_ids) + 1e-3


def test_a_failing_long_context_is_judged_by_hfs_one_pass_alone(tiny_model, monkeypatch):
    """HF's token-by-token decode of the whole context (the schedules grid's second reference, asked
    past the tolerance) is never asked of the long context: it would cost more than the rest of the
    run. The failing row keeps the one-pass judgement's figure."""
    from gemma4_static.oracle.episodes import scores

    def refused(*args, **kwargs):
        raise AssertionError("HF's token-by-token decode asked of the long context")

    monkeypatch.setattr(scores, "hf_token_by_token_logits", refused)
    port = f"{__name__}:ShortContextDecodeOff"
    (row,) = verify(tiny_model, VerifyOptions(port=port, groups=("long-positions",))).rows
    assert row.failed and row.compared and not row.raised and row.value == pytest.approx(1e-3, rel=0.1), row


def test_in_a_low_precision_profile_the_long_prompt_is_scored_against_float64(tiny_model):
    """bfloat16: the long prompt's case against HF in float64 (its SQNR against the profile's gate,
    HF's own figure beside it), not the float32 tolerance."""
    options = VerifyOptions(port=f"{ADAPTERS}:ShortContextPort", dtype=torch.bfloat16, groups=("long-positions",))
    (row,) = verify(tiny_model, options).rows
    assert row.check == "prompt 62: 1 schedule, chunk ends, last token, 2 decode steps, vs float64", row
    assert (row.stage, row.group) == ("long positions", "long-positions"), row
    assert (row.metric, row.tolerance) == ("SQNR dB", 20.0) and row.compared and not row.failed, row
    assert row.hf == row.hf and row.hf > 20.0, row  # HF in bfloat16 measured against the same float64 answers
