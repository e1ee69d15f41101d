"""Invariants of the independent RoPE tables."""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from gemma4_static import RopeTables, build_rope, inverse_frequencies, read_text_config
from tests.strategies import text_configs

positions = st.lists(st.integers(0, 9000), min_size=1, max_size=16)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _apply(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    return x * cos + _rotate_half(x) * sin


@given(text_configs(), positions)
def test_cos_squared_plus_sin_squared_is_one(config, pos):
    for cos, sin in build_rope(config, torch.tensor(pos)).values():
        # fp32 cos/sin each carry <= 1 ulp (6e-8) of rounding; their squares sum to within ~2.4e-7.
        torch.testing.assert_close(cos**2 + sin**2, torch.ones_like(cos), atol=5e-7, rtol=0)


@given(text_configs(), positions)
def test_non_rotated_pairs_are_exactly_one_and_zero(config, pos):
    view = read_text_config(config)
    for name, (cos, sin) in build_rope(config, torch.tensor(pos)).items():
        spec = view.spec(name).rope
        half = spec.head_dim // 2
        rotated = half if spec.rope_type == "default" else int(spec.partial_rotary_factor * spec.head_dim // 2)
        still = torch.cat((torch.arange(rotated, half), torch.arange(half + rotated, 2 * half)))
        assert torch.equal(inverse_frequencies(spec)[rotated:], torch.zeros(half - rotated))
        assert (cos[..., still] == 1.0).all()
        assert (sin[..., still] == 0.0).all()
        if spec.rope_type == "proportional":
            assert rotated == int(0.25 * spec.head_dim // 2)


@given(text_configs(), st.integers(0, 2000), st.integers(0, 2000), st.integers(0, 300), st.data())
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


@given(text_configs(), positions, st.sampled_from([torch.float32, torch.bfloat16, torch.float16]))
def test_table_slice_equals_direct_computation(config, pos, dtype):
    view = read_text_config(config)
    table = RopeTables(config, max(pos) + 1)
    looked_up = table(torch.tensor(pos), dtype=dtype)
    for name, (cos, sin) in looked_up.items():
        spec = view.spec(name).rope
        angles = torch.tensor(pos, dtype=torch.float32)[:, None] * inverse_frequencies(spec)[None, :]
        angles = torch.cat((angles, angles), dim=-1)
        assert cos.shape == (1, len(pos), spec.head_dim)
        assert torch.equal(cos[0], angles.cos().to(dtype))
        assert torch.equal(sin[0], angles.sin().to(dtype))


def test_tables_are_built_once_and_reused(tiny_model):
    first = RopeTables(tiny_model.config, 512)
    second = RopeTables(tiny_model.config, 512)
    for name in first.tables:
        assert first.tables[name] is second.tables[name]
