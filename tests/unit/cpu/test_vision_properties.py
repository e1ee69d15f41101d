"""Invariants of the vision stage's CPU side across patch grids, pooling kernels and padding: the
pooling matrix averages each k x k block of valid patches into one soft token, padded patches
contribute nothing, the mask forbids exactly the padded keys, and the 2-D RoPE is axial."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from gemma4_static.cpu.vision import build_vision_inputs, fit_patches
from gemma4_static.spec import VisionSpec


def _spec(base: VisionSpec, kernel: int) -> VisionSpec:
    """The tiny tower's spec with another pooling kernel and a 256-entry position table."""
    return dataclasses.replace(base, pooling_kernel_size=kernel, position_embedding_size=256)


def _grid_ids(width: int, height: int, budget: int) -> torch.Tensor:
    """What HF's image processor returns for a ``width x height`` patch grid: row-major (x, y), then (-1, -1)."""
    y, x = torch.meshgrid(torch.arange(height), torch.arange(width), indexing="ij")
    ids = torch.full((budget, 2), -1)
    ids[: width * height] = torch.stack((x.flatten(), y.flatten()), dim=-1)
    return ids


@st.composite
def image_batches(draw):
    """``(kernel, profile, ids (N, profile * k^2, 2))`` for 1-3 images of random block grids."""
    kernel = draw(st.integers(1, 3))
    profile = draw(st.integers(1, 24))
    images = []
    for _ in range(draw(st.integers(1, 3))):
        blocks_wide = draw(st.integers(1, profile))
        blocks_high = draw(st.integers(1, profile // blocks_wide))
        images.append(_grid_ids(blocks_wide * kernel, blocks_high * kernel, profile * kernel**2))
    return kernel, profile, torch.stack(images)


@given(image_batches())
@example((3, 1, _grid_ids(3, 3, 9)[None]))  # one soft token, no padding
@example((2, 8, torch.stack([_grid_ids(2, 2, 32), _grid_ids(16, 2, 32)])))  # mostly padding beside none
def test_pooling_averages_each_block_of_valid_patches(tiny_vision, batch):
    kernel, profile, ids = batch
    inputs = build_vision_inputs(_spec(tiny_vision, kernel), ids, profile=profile)
    pooling, valid = inputs.pooling, ~inputs.padding
    assert pooling.shape == (len(ids), profile, profile * kernel**2)
    assert (pooling[~valid[:, None, :].expand_as(pooling)] == 0).all()  # padded patches contribute nothing
    nonzero = pooling != 0
    assert (nonzero.sum(dim=1) == valid.long()).all()  # each valid patch feeds exactly one soft token
    assert torch.equal(pooling[nonzero], torch.full_like(pooling[nonzero], kernel**-2))
    counts = valid.sum(dim=1) // kernel**2
    assert torch.equal(inputs.soft_tokens, counts)
    for image, count in enumerate(counts.tolist()):
        assert (nonzero[image, :count].sum(dim=-1) == kernel**2).all()  # valid soft tokens come first
        assert not nonzero[image, count:].any()
        # the patches of one soft token form one k x k block
        for token in range(count):
            block = inputs.positions[image][nonzero[image, token]] // kernel
            assert (block == block[0]).all()


@given(image_batches())
def test_mask_forbids_exactly_the_padded_keys(tiny_vision, batch):
    kernel, profile, ids = batch
    inputs = build_vision_inputs(_spec(tiny_vision, kernel), ids, profile=profile, mask_value=-30000.0)
    assert inputs.mask.shape == (len(ids), 1, 1, profile * kernel**2)  # key-only, the same for every query
    assert torch.equal(inputs.mask[:, 0, 0] == 0, ~inputs.padding)
    assert (inputs.mask[:, 0, 0][inputs.padding] == -30000.0).all()


@given(image_batches(), st.sampled_from([torch.float32, torch.bfloat16]))
def test_rope_is_axial_and_equals_direct_computation(tiny_vision, batch, dtype):
    kernel, profile, ids = batch
    spec = _spec(tiny_vision, kernel)
    inputs = build_vision_inputs(spec, ids, profile=profile, dtype=dtype)
    # axial: the first half of every head depends on x only, the second on y only
    half = spec.head_dim // 2
    for axis, part in ((0, slice(None, half)), (1, slice(half, None))):
        coordinate = inputs.positions[..., axis]
        for value in coordinate.unique().tolist():
            rows = inputs.cos[..., part][coordinate == value]
            assert (rows == rows[0]).all()
    # and the angles are theta ** -(2i / (D / 2)) per axis, written out here (not the function under test)
    spatial = spec.head_dim // 2
    inverse = 1.0 / (spec.rope_theta ** (torch.arange(0, spatial, 2, dtype=torch.float32) / spatial))
    angles = inputs.positions[..., None].float() * inverse  # (N, P, 2, D/4)
    x, y = angles[..., 0, :], angles[..., 1, :]
    expected = torch.cat((x, x, y, y), dim=-1)
    assert torch.equal(inputs.cos, expected.cos().to(dtype))
    assert torch.equal(inputs.sin, expected.sin().to(dtype))


def test_patch_budget_must_be_the_profiles(tiny_vision):
    ids = _grid_ids(4, 4, 16)[None]
    with pytest.raises(
        ValueError, match=r"the vision profile of 70 soft tokens takes \(N, 280, 2\) \(70 x 2\^2 patches\)"
    ):
        build_vision_inputs(_spec(tiny_vision, 2), ids, profile=70)


@pytest.mark.parametrize(
    ("ids", "error", "message"),
    [
        (
            torch.tensor([[[0, 0], [-1, 3], [1, 0], [1, 1]]]),
            ValueError,
            r"\(x, y\) in \[0, position_embedding_size=256\)",
        ),
        (torch.tensor([[[0, 0], [300, 0], [1, 0], [1, 1]]]), ValueError, r"or \(-1, -1\) for padding"),
        (torch.zeros(1, 4, 2), TypeError, r"image_position_ids must be an integer torch.Tensor"),
        (
            torch.tensor([[[0, 0], [1, 0], [0, 1], [5, 5]]]),
            ValueError,
            r"more than 1 soft tokens, beyond the vision profile",
        ),
    ],
    ids=["half-padded", "out-of-table", "float", "not-a-grid"],
)
def test_bad_image_position_ids(tiny_vision, ids, error, message):
    with pytest.raises(error, match=message):
        build_vision_inputs(_spec(tiny_vision, 2), ids, profile=1)


@given(image_batches(), st.integers(0, 40), st.randoms(use_true_random=False))
def test_patches_fitted_to_a_larger_profile_pool_to_the_same_soft_tokens(tiny_vision, batch, extra, random):
    """Images at their own patch count, shuffled, laid out at a profile with ``extra`` more soft
    tokens: valid patches first with their pixels, the same soft-token count and pooled blocks."""
    kernel, profile, ids = batch
    spec = _spec(tiny_vision, kernel)
    order = list(range(ids.shape[1]))
    random.shuffle(order)
    shuffled = ids[:, order]
    pixels = torch.randn(ids.shape[0], ids.shape[1], 3) + (shuffled != -1).all(dim=-1, keepdim=True)
    fitted_pixels, fitted_ids = fit_patches(pixels, shuffled, spec, profile=profile + extra)
    budget = (profile + extra) * kernel**2
    assert fitted_ids.shape == (ids.shape[0], budget, 2) and fitted_pixels.shape == (ids.shape[0], budget, 3)
    valid = (fitted_ids != -1).all(dim=-1)
    counts = (shuffled != -1).all(dim=-1).sum(dim=-1)
    assert torch.equal(valid, torch.arange(budget)[None, :] < counts[:, None])  # valid first, then padding
    for image in range(ids.shape[0]):
        kept = (shuffled[image] != -1).all(dim=-1)
        assert torch.equal(fitted_ids[image, : counts[image]], shuffled[image][kept])
        assert torch.equal(fitted_pixels[image, : counts[image]], pixels[image][kept])
    ours = build_vision_inputs(spec, fitted_ids, profile=profile + extra)
    theirs = build_vision_inputs(spec, ids, profile=profile)
    assert torch.equal(ours.soft_tokens, theirs.soft_tokens)
    # every soft token gathers as many patches as before (with the same weight), none beyond the old profile
    assert torch.equal((ours.pooling[:, :profile] > 0).sum(dim=-1), (theirs.pooling > 0).sum(dim=-1))
    weight = torch.tensor(1 / kernel**2, dtype=torch.float32)
    assert not ours.pooling[:, profile:].any() and bool(((ours.pooling == 0) | (ours.pooling == weight)).all())


def test_an_image_beyond_the_profile_names_both_numbers(tiny_vision):
    spec = _spec(tiny_vision, 2)
    ids = _grid_ids(6, 4, 24)[None]  # 24 patches: 6 soft tokens
    message = r"an image has 24 patches \(6 soft tokens\), more than the vision profile of 4 soft tokens"
    with pytest.raises(ValueError, match=message):
        fit_patches(torch.zeros(1, 24, 3), ids, spec, profile=4)
