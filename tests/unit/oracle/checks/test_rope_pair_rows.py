"""The RoPE rows of a port's cos/sin tables against HF's, one per layer type: the worse of cos and
sin; a layer type one side lacks, or a table in another dtype, is an infinite max abs diff (a FAIL
row, never a missing one). Tolerance: ``tolerances.ROPE`` of the dtype, as the group gates them."""

from __future__ import annotations

import math

import torch

from gemma4_static.oracle.checks.parity import rope_pairs_rows
from gemma4_static.oracle.results import tolerances

FP32 = torch.float32


def _tables(shift: float = 0.0, sin_shift: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    angles = torch.arange(12, dtype=FP32).reshape(3, 4)
    return torch.cos(angles) + shift, torch.sin(angles) + sin_shift


def test_each_layer_type_is_one_row_with_the_worse_of_cos_and_sin():
    ours = {"full_attention": _tables(), "sliding_attention": _tables(shift=1e-3, sin_shift=2e-3)}
    theirs = {"full_attention": _tables(), "sliding_attention": _tables()}
    full, sliding = rope_pairs_rows("RoPE", "tables", ours, theirs, FP32)
    assert (full.check, full.metric, full.value, full.failed) == ("full_attention tables", "max abs diff", 0.0, False)
    assert sliding.check == "sliding_attention tables" and math.isclose(sliding.value, 2e-3, rel_tol=1e-3)
    assert sliding.tolerance == tolerances.ROPE[FP32] and sliding.failed


def test_a_missing_layer_type_or_another_dtype_is_an_infinite_failure():
    theirs = {"full_attention": _tables(), "sliding_attention": _tables()}
    ours = {"sliding_attention": tuple(table.double() for table in _tables())}
    rows = rope_pairs_rows("RoPE", "tables", ours, theirs, FP32)
    assert [(row.check, row.metric, row.value, row.failed) for row in rows] == [
        ("full_attention tables", "max abs diff", math.inf, True),
        ("sliding_attention tables", "max abs diff", math.inf, True),
    ]
