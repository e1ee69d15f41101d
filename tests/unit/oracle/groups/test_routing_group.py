"""The routing group's rows without a ledger of expert choices: none on a dense model; on a
mixture-of-experts model one SKIP row saying why the choices cannot be seen (they are recorded on
this runtime's PyTorch stages in float32 only), never a silent nothing."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gemma4_static.oracle.groups.routing import routing_rows


def _session(moe: bool) -> SimpleNamespace:
    text = SimpleNamespace(enable_moe_block=moe)
    return SimpleNamespace(routing=None, config=SimpleNamespace(get_text_config=lambda: text))


def test_a_dense_model_has_no_routing_rows():
    assert list(routing_rows(_session(moe=False))) == []


def test_a_moe_model_without_recorded_choices_gets_a_skip_row_saying_why():
    (row,) = routing_rows(_session(moe=True))
    assert (row.stage, row.check, row.status) == ("routing", "expert choices vs HF", "SKIP")
    assert "float32 only" in row.skipped and "tie" in row.skipped, row.skipped


@pytest.mark.parametrize("moe", [False, True])
def test_recorded_choices_are_the_rows(moe):
    ledger_rows = [SimpleNamespace(check="expert choices vs HF")]
    session = _session(moe)
    session.routing = SimpleNamespace(rows=lambda: ledger_rows)
    assert list(routing_rows(session)) == ledger_rows
