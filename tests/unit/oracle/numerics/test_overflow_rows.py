"""The overflow group's rows: one per stage and per decoder layer (its largest sub-stage), each with
the headroom to the dtype's largest finite value; a stage that only ever held zeros has all of it."""

from __future__ import annotations

import torch

from gemma4_static.oracle.numerics.overflow import overflow_rows


def test_each_stage_and_layer_is_one_row_named_by_its_largest_sub_stage_and_its_headroom():
    ranges = {"embedding": 2.0, "layer 0 attention": 1.0, "layer 0 mlp": 8.0, "layer 1 attention": 0.0}
    rows = overflow_rows(ranges, torch.float16)  # float16's largest finite value: 65504
    assert [(row.check, row.value, row.status) for row in rows] == [
        ("embedding, headroom 3.28e+04x", 2.0, "PASS"),
        ("layer 0 mlp, headroom 8.19e+03x", 8.0, "PASS"),
        ("layer 1 attention, headroom infx", 0.0, "PASS"),  # all zeros: no division, infinite headroom
    ]
