"""Hypothesis strategies for masks and RoPE: configs, matching valid-token masks, positions."""

from __future__ import annotations

import torch
from hypothesis import strategies as st
from hypothesis.vendor.pretty import for_type_by_name
from transformers import Gemma4TextConfig

from gemma4_static import read_text_config
from gemma4_static.oracle.models import E2B_ROPE_PARAMETERS


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
) -> Gemma4TextConfig:
    """A narrow Gemma 4 text config with the given mask/RoPE-relevant fields."""
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
        rope_parameters=E2B_ROPE_PARAMETERS,
        vocab_size=32,
        vocab_size_per_layer_input=32,
        hidden_size_per_layer_input=4,
        use_bidirectional_attention=bidirectional,
    )


# Known edge cases, used as explicit examples: a window of one token, and a window past any length.
WINDOW_ONE = small_text_config(sliding_window=1, layer_types=["sliding_attention", "full_attention"])
WINDOW_HUGE = small_text_config(sliding_window=4096, layer_types=["sliding_attention", "full_attention"])


CAUSAL_MODES = st.sampled_from([None, "vision"])


@st.composite
def text_configs(draw, *, bidirectional=CAUSAL_MODES) -> Gemma4TextConfig:
    """A small Gemma 4 text config: random window, head dims and layer pattern (ending in full)."""
    num_layers = draw(st.integers(1, 6))
    layer_types = [draw(st.sampled_from(["sliding_attention", "full_attention"])) for _ in range(num_layers - 1)]
    return small_text_config(
        sliding_window=draw(st.integers(1, 40)),
        layer_types=[*layer_types, "full_attention"],
        head_dim=draw(st.sampled_from([8, 16, 32])),
        global_head_dim=draw(st.sampled_from([16, 32, 64])),
        bidirectional=draw(bidirectional),
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
