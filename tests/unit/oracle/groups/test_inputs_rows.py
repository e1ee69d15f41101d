"""The ``inputs`` group's rows where a stage cannot be compared: a port that exposes no stage gets a
SKIP row per stage, under the stage and check it would have had; a model without per-layer
embeddings gets one SKIP row for the PLE saying so."""

from __future__ import annotations

from gemma4_static.oracle.flow.verify import verify
from gemma4_static.oracle.options import VerifyOptions
from gemma4_static.oracle.session.session import Session

ADAPTERS = "tests.unit.ports.port_adapters"


def _skipped(rows) -> list[tuple[str, str]]:
    return [(row.stage, row.check) for row in rows if row.status == "SKIP" and row.skipped]


def test_a_port_that_exposes_no_stage_has_a_skip_row_per_stage(tiny_model):
    rows = verify(tiny_model, VerifyOptions(port=f"{ADAPTERS}:NothingPort", groups=("inputs",))).rows
    skipped = _skipped(rows)
    assert ("token embedding", "vs get_input_embeddings") in skipped
    assert ("PLE", "vs project_per_layer_inputs") in skipped


def test_a_model_without_per_layer_embeddings_skips_the_ple_saying_so(tiny_model, monkeypatch):
    """(The tiny model stands in for one: the session says it has none, as for the 31B geometry.)"""
    monkeypatch.setattr(Session, "has_per_layer_inputs", property(lambda session: False))
    rows = verify(tiny_model, VerifyOptions(groups=("inputs",))).rows
    (ple,) = [row for row in rows if row.stage == "PLE"]
    assert (ple.status, ple.check) == ("SKIP", "vs project_per_layer_inputs")
    assert ple.skipped == "the model has no per-layer embeddings"
