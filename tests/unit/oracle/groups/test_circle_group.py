"""The ``circle`` group without the ``circle`` extra: one SKIP row naming the extra (and nothing
converted), for a port that declares Circle graphs; the group's rows with it: ``test_group_pairs.py``."""

from __future__ import annotations

from gemma4_static.oracle.flow.verify import verify
from gemma4_static.oracle.groups import circle as circle_group
from gemma4_static.oracle.options import VerifyOptions

MISSING = "the circle extra (onert not installed; onert has wheels for CPython 3.10 to 3.12): pip install ..."


def test_without_the_extra_the_group_skips_naming_it(monkeypatch, tiny_model):
    monkeypatch.setattr(circle_group, "circle_missing", lambda: MISSING)
    monkeypatch.setattr(circle_group.circle, "shipped_rows", lambda cases: [])  # reaching it would be a bug
    port = "gemma4_static.oracle.faults.host_faults:CircleAttention"
    (row,) = verify(tiny_model, VerifyOptions(port=port, groups=("circle",))).rows
    assert (row.status, row.group, row.stage, row.skipped) == (
        "SKIP",
        "circle",
        "circle round-trip",
        f"Circle graphs need {MISSING}",
    )
