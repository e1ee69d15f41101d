"""Hypothesis strategies for masks and RoPE: configs, matching valid-token masks, positions."""

from __future__ import annotations

import torch
from hypothesis import strategies as st
from hypothesis.vendor.pretty import for_type_by_name
from transformers import Gemma4TextConfig

from gemma4_static import read_text_config
from gemma4_static.oracle.references.models import E2B_ROPE_PARAMETERS


def _print_config(config, printer, cycle) -> None:
    """Hypothesis reports a config by the fields masks and RoPE read (HF's own repr is unusable there)."""
    view = read_text_config(config)
    printer.text(
        f"Gemma4TextConfig(layer_types={list(view.layer_types)}, sliding_window={view.sliding_window}, "
        f"use_bidirectional_attention={view.use_bidirectional_attention!r}, "
        f"head_dims={ {name: spec.head_dim for name, spec in view.type_specs} })"
    )


for_type_by_name(Gemma4TextConfig.__module__, Gemma4TextConfig.__name__, _print_config)


def small_text_config(
    *,
    sliding_window: int,
    layer_types: list[str],
    head_dim: int = 16,
    global_head_dim: int = 32,
    bidirectional: str | None = None,
    rope_parameters: dict | None = None,
) -> Gemma4TextConfig:
    """A narrow Gemma 4 text config with the given mask/RoPE-relevant fields (RoPE: E2B's by default)."""
    return Gemma4TextConfig(
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=len(layer_types),
        num_attention_heads=1,
        num_key_value_heads=1,
        head_dim=head_dim,
        global_head_dim=global_head_dim,
        sliding_window=sliding_window,
        layer_types=layer_types,
        rope_parameters=rope_parameters or E2B_ROPE_PARAMETERS,
        vocab_size=32,
        vocab_size_per_layer_input=32,
        hidden_size_per_layer_input=4,
        use_bidirectional_attention=bidirectional,
    )


def around(low: int, high: int, spread: int = 3) -> st.SearchStrategy[int]:
    """An int near the valid range ``[low, high]``: its exact ends and the first values outside them
    (``low - 1``, ``high + 1``), as often as any value within ``spread`` of the range."""
    return st.one_of(st.sampled_from([low, high, low - 1, high + 1]), st.integers(low - spread, high + spread))


# Known edge cases, used as explicit examples: a window of one token, and a window past any length.
WINDOW_ONE = small_text_config(sliding_window=1, layer_types=["sliding_attention", "full_attention"])
WINDOW_HUGE = small_text_config(sliding_window=4096, layer_types=["sliding_attention", "full_attention"])


CAUSAL_MODES = st.sampled_from([None, "vision"])
E2B_ROPE = st.just(None)


# partial_rotary_factor: the edges (0: nothing rotates, 1: every pair), E2B's 0.25, and any value
PARTIAL_ROTARY_FACTORS = st.one_of(st.sampled_from([0.0, 0.25, 1.0]), st.floats(0.0, 1.0))
THETAS = st.one_of(st.sampled_from([10_000.0, 1_000_000.0]), st.floats(10.0, 1e8))


@st.composite
def rope_parameters(draw) -> dict:
    """Per-layer-type RoPE parameters: sliding layers default RoPE, full layers default or
    proportional, each with its own theta; proportional with any ``partial_rotary_factor`` and
    ``factor`` (HF's default RoPE reads neither, so the strategy puts them there too, to be ignored)."""
    full = {
        "rope_type": draw(st.sampled_from(["proportional", "default"])),
        "rope_theta": draw(THETAS),
        "partial_rotary_factor": draw(PARTIAL_ROTARY_FACTORS),
        "factor": draw(st.one_of(st.just(1.0), st.floats(0.25, 64.0))),
    }
    return {"full_attention": full, "sliding_attention": {"rope_type": "default", "rope_theta": draw(THETAS)}}


@st.composite
def text_configs(draw, *, bidirectional=CAUSAL_MODES, rope=E2B_ROPE) -> Gemma4TextConfig:
    """A small Gemma 4 text config: random window, head dims and layer pattern with both layer
    types (at least one sliding layer, the last one full), so no property passes vacuously on a
    config without the layer type it is about; ``rope`` draws the RoPE parameters (None: E2B's)."""
    num_layers = draw(st.integers(2, 6))
    layer_types = [draw(st.sampled_from(["sliding_attention", "full_attention"])) for _ in range(num_layers - 1)]
    layer_types[draw(st.integers(0, num_layers - 2))] = "sliding_attention"
    return small_text_config(
        sliding_window=draw(st.one_of(st.sampled_from([1, 48]), st.integers(1, 40))),  # 48: the whole length
        layer_types=[*layer_types, "full_attention"],
        head_dim=draw(st.sampled_from([2, 8, 16, 32])),
        global_head_dim=draw(st.sampled_from([16, 32, 64, 128])),
        bidirectional=draw(bidirectional),
        rope_parameters=draw(rope),
    )


@st.composite
def valid_masks(draw, *, max_batch: int = 3, max_length: int = 48, min_valid: int = 1) -> torch.Tensor:
    """A ``(B, S)`` bool valid-token mask of any layout; each row has at least ``min_valid`` True."""
    batch = draw(st.integers(1, max_batch))
    length = draw(st.integers(max(1, min_valid), max_length))
    rows = []
    for _ in range(batch):
        bits = draw(st.lists(st.booleans(), min_size=length, max_size=length))
        row = torch.tensor(bits, dtype=torch.bool)
        keep = draw(st.lists(st.integers(0, length - 1), min_size=min_valid, max_size=min_valid))
        row[keep] = True
        rows.append(row)
    return torch.stack(rows)


@st.composite
def token_types(draw, shape: tuple[int, int]) -> torch.Tensor:
    """``mm_token_type_ids`` of ``shape``: runs of text (0), image (1) and video (2) tokens."""
    batch, length = shape
    rows = []
    for _ in range(batch):
        row: list[int] = []
        while len(row) < length:
            row += [draw(st.sampled_from([0, 0, 1, 2]))] * draw(st.integers(1, 8))
        rows.append(row[:length])
    return torch.tensor(rows, dtype=torch.long)


@st.composite
def padding_changes(draw, previous: torch.Tensor) -> torch.Tensor:
    """A valid-token mask of ``previous``'s ``(B, S)`` shape, each row drawn as a prompt a runtime
    meets next: right or left padding of any length, holes anywhere, or the previous row with a few
    slots flipped (each row keeps at least one valid slot)."""
    length = previous.shape[1]
    rows = []
    for row in previous:
        kind = draw(st.sampled_from(["right", "left", "holes", "flips"]))
        if kind in ("right", "left"):
            valid = torch.arange(length) < draw(st.integers(1, length))
            row = valid if kind == "right" else valid.flip(0)
        elif kind == "holes":
            row = torch.tensor(draw(st.lists(st.booleans(), min_size=length, max_size=length)))
        else:
            row = row.clone()
            for slot in draw(st.lists(st.integers(0, length - 1), max_size=3)):
                row[slot] = not row[slot]
        row[draw(st.integers(0, length - 1))] |= not row.any()
        rows.append(row)
    return torch.stack(rows)
