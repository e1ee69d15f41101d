"""RoPE with generated parameters against HF's rotary embedding, and invariants of the tables."""

from __future__ import annotations

import torch
from hypothesis import event, given
from hypothesis import strategies as st

from gemma4_static import RopeTables, build_rope, read_text_config
from gemma4_static.oracle.checks import parity
from gemma4_static.oracle.references.hf import hf_rope
from gemma4_static.oracle.results import tolerances
from gemma4_static.oracle.results.report import assert_rows_pass
from gemma4_static.ports.static import rope_of
from tests.strategies import rope_parameters, text_configs

positions = st.lists(st.integers(0, 9000), min_size=1, max_size=16)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _apply(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    return x * cos + _rotate_half(x) * sin


def _describe(spec) -> None:
    """Count what each example exercised (``--hypothesis-show-statistics``)."""
    event(f"{spec.rope_type} RoPE")
    if spec.rope_type == "proportional":
        rotated = int(spec.partial_rotary_factor * spec.head_dim // 2)
        event(
            "nothing rotates"
            if rotated == 0
            else "every pair rotates"
            if rotated == spec.head_dim // 2
            else "some pairs rotate"
        )
        event("factor 1" if spec.factor == 1.0 else "factor != 1")


@given(text_configs(rope=rope_parameters()), positions, st.sampled_from(list(tolerances.ROPE)))
def test_rope_matches_hf_for_generated_parameters(config, pos, dtype):
    """Any theta, partial rotary factor (0 and 1 included), factor and head dims, both layer types,
    against ``Gemma4TextRotaryEmbedding`` (tolerances: ``tolerances.ROPE``, with their reasons)."""
    view = read_text_config(config)
    for _, spec in view.type_specs:
        _describe(spec.rope)
    position_ids = torch.tensor(pos)[None]
    assert_rows_pass(parity.rope_rows(config, rope_of(config), position_ids, dtype))
    # the runtime's own path: tables of one static length, gathered per call
    tables = RopeTables(config, max(pos) + 1)(position_ids, dtype=dtype)
    for name, (cos, sin) in hf_rope(config, position_ids, dtype=dtype).items():
        assert_rows_pass(
            [
                parity.compare("RoPE", f"{name} table", a, b, tolerances.ROPE[dtype])
                for a, b in zip(tables[name], (cos, sin), strict=True)
            ]
        )


@given(text_configs(rope=rope_parameters()), positions)
def test_non_rotated_pairs_are_exactly_one_and_zero(config, pos):
    view = read_text_config(config)
    for name, (cos, sin) in build_rope(config, torch.tensor(pos)).items():
        spec = view.spec(name).rope
        _describe(spec)
        half = spec.head_dim // 2
        rotated = half if spec.rope_type == "default" else int(spec.partial_rotary_factor * spec.head_dim // 2)
        still = torch.cat((torch.arange(rotated, half), torch.arange(half + rotated, 2 * half)))
        assert (cos[..., still] == 1.0).all()
        assert (sin[..., still] == 0.0).all()


@given(text_configs(rope=rope_parameters()), st.integers(0, 2000), st.integers(0, 2000), st.integers(0, 300), st.data())
def test_score_depends_only_on_position_difference(config, p, q, shift, data):
    seed = data.draw(st.integers(0, 2**16))
    view = read_text_config(config)
    generator = torch.Generator().manual_seed(seed)
    for name in view.unique_layer_types:
        head_dim = view.spec(name).head_dim
        query, key = torch.randn(2, head_dim, generator=generator, dtype=torch.float64)
        rope = build_rope(config, torch.tensor([p, q, p + shift, q + shift]), dtype=torch.float64)
        cos, sin = (t[0] for t in rope[name])
        score = _apply(query, cos[0], sin[0]) @ _apply(key, cos[1], sin[1])
        shifted = _apply(query, cos[2], sin[2]) @ _apply(key, cos[3], sin[3])
        # Angles are fp32 products (as HF computes them): at positions <= 2300 each is rounded by at
        # most half an ulp of 2300, 1.2e-4 rad. Four angles enter the two scores, so by Cauchy-Schwarz
        # the scores differ by at most 4 * 1.2e-4 * |q||k|; a position-dependent bug moves them by O(|q||k|).
        bound = 5e-4 * float(query.norm() * key.norm())
        assert abs(float(score - shifted)) <= bound


def test_tables_are_built_once_and_reused(tiny_model):
    first = RopeTables(tiny_model.config, 512)
    second = RopeTables(tiny_model.config, 512)
    for name in first.tables:
        assert first.tables[name] is second.tables[name]


@given(start=st.integers(0, 400), length=st.integers(1, 100), dtype=st.sampled_from([torch.float32, torch.bfloat16]))
def test_a_run_of_consecutive_positions_is_a_slice_of_the_table_with_the_gathers_values(
    tiny_model, start, length, dtype
):
    """One row of consecutive positions (a prefill or a chunk) reads the table as a slice (in float32
    a view of it, no copy); the values are the row gather's, which two rows still take."""
    tables = RopeTables(tiny_model.config, 512)
    positions = torch.arange(start, start + length)[None]
    sliced = tables.lookup(positions, dtype)
    gathered = tables.lookup(positions.expand(2, -1), dtype)
    for name, (cos, sin) in sliced.items():
        assert torch.equal(cos[0], gathered[name][0][1]) and torch.equal(sin[0], gathered[name][1][1])
        shared = cos.untyped_storage().data_ptr() == tables.tables[name].cos.untyped_storage().data_ptr()
        assert shared == (dtype == torch.float32)
