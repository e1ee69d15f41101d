"""The routing ledger's two rows read as text: the decided disagreements (must be none, the first
three named) and the ties pinned to this runtime's choice (counted, the three closest named); the
token keys HF's side routes with, followed across calls through its cache."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from gemma4_static.oracle.checks.routing import MARGIN_BOUND, RoutingLedger, _HFPinner


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


def _call(
    pinner: _HFPinner, ids: list[list[int]] | None, cache: object, output: object, *, cache_name: str = "cache"
) -> list[int | None]:
    """One forward of HF's model as the pinner's hooks see it (the cache passed under ``cache_name``):
    the tokens' keys the call routes with."""
    pinner._before(None, (), {"input_ids": None if ids is None else torch.tensor(ids), cache_name: cache})
    keys = list(pinner.keys)
    pinner._after(None, (), {}, output)
    return keys


def test_a_tokens_key_follows_its_rows_history_through_the_cache_hf_returns():
    """A decode step's token has the key it has at the end of the whole sequence in one call (its
    row's history kept under the cache HF returned); a call given embeddings instead of ids, or one
    returning a tuple, leaves every history as it was."""
    whole = _call(_HFPinner(RoutingLedger(), None), [[5, 6, 7, 8]], None, None)
    cache = object()
    pinner = _HFPinner(RoutingLedger(), None)
    assert _call(pinner, None, cache, SimpleNamespace(cache=cache)) == []  # embeddings: no token keys
    assert _call(pinner, [[5, 6, 7]], cache, (torch.zeros(1),)) == whole[:3]  # a tuple: no cache to follow
    assert _call(pinner, [[5, 6, 7]], cache, SimpleNamespace(cache=cache)) == whole[:3]
    assert _call(pinner, [[8]], cache, SimpleNamespace(cache=cache)) == whole[3:]
    # the cache passed under the name transformers 5.24 still accepts (deprecated for 5.40)
    renamed, pinner = object(), _HFPinner(RoutingLedger(), None)
    for ids, keys in (([[5, 6, 7]], whole[:3]), ([[8]], whole[3:])):
        assert _call(pinner, ids, renamed, SimpleNamespace(cache=renamed), cache_name="past_key_values") == keys
