"""The routing ledger's two rows read as text: the decided disagreements (must be none, the first
three named) and the ties pinned to this runtime's choice (counted, the three closest named)."""

from __future__ import annotations

from gemma4_static.oracle.checks.routing import MARGIN_BOUND, RoutingLedger


def test_the_rows_name_the_first_disagreements_and_the_closest_ties():
    ledger = RoutingLedger(
        matched=46,
        decided=["layer 1 token 3", "layer 2 token 0", "layer 2 token 5", "layer 4 token 1"],
        ties=[
            (3e-6, "layer 0 token 2"),
            (1e-7, "layer 3 token 4"),
            (5e-5, "layer 1 token 1"),
            (2e-5, "layer 2 token 2"),
        ],
    )
    decided, ties = ledger.rows()
    assert decided.check == f"top-k of 46 token choices vs HF, HF margin > {MARGIN_BOUND:g}"
    assert (decided.metric, decided.value, decided.status) == ("decided disagreements", 4, "FAIL")
    assert decided.detail == "layer 1 token 3; layer 2 token 0; layer 2 token 5"
    assert ties.check == "top-k of 46 token choices vs HF, ties pinned to this runtime's choice"
    assert (ties.metric, ties.value, ties.status) == ("ties", 4, "INFO")
    assert ties.detail == "closest: layer 3 token 4 (1e-07), layer 0 token 2 (3e-06), layer 2 token 2 (2e-05)"


def test_without_ties_or_disagreements_the_rows_pass_with_nothing_named():
    decided, ties = RoutingLedger(matched=10).rows()
    assert decided.status == "PASS" and decided.detail == "" and ties.value == 0 and ties.detail == ""
