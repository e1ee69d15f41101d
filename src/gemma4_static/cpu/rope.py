"""Rotary position embeddings per layer type, computed from the config alone.

Layout follows HF: ``cos``/``sin`` are ``(B, S, head_dim)`` with the two halves concatenated
(``[f_0 .. f_{D/2-1}, f_0 .. f_{D/2-1}]``), to be used with ``rotate_half``. Tables are fp32,
built once per ``(RopeSpec, max_seq)`` and gathered per call; the cast to the requested dtype
happens after the gather, so every dtype sees the same fp32 angles HF computes.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import torch

from ..spec import RopeSpec, read_text_config
from .checks import floating_dtype, position_ids_2d, positive_int

_MIN_TABLE_LENGTH = 256


def inverse_frequencies(spec: RopeSpec) -> torch.Tensor:
    """Inverse frequencies ``(head_dim // 2,)`` in fp32.

    ``default``: ``theta ** -(2i / head_dim)`` for every pair. ``proportional``: the first
    ``int(partial_rotary_factor * head_dim // 2)`` pairs use the same exponents (over the *full*
    head dim), the remaining pairs get 0 (they never rotate); the result is divided by ``factor``.
    Computed in fp32 exactly as HF does, so angles agree bit for bit.
    """
    half = spec.head_dim // 2
    rotated = half if spec.rope_type == "default" else int(spec.partial_rotary_factor * spec.head_dim // 2)
    exponents = torch.arange(0, 2 * rotated, 2, dtype=torch.int64).to(torch.float32) / spec.head_dim
    inv_freq = torch.zeros(half, dtype=torch.float32)
    inv_freq[:rotated] = 1.0 / (spec.theta**exponents)
    return inv_freq / spec.factor


class RopeTable:
    """fp32 cos/sin for positions ``[0, length)`` of one RoPE spec, each ``(length, head_dim)``."""

    def __init__(self, spec: RopeSpec, length: int) -> None:
        self.spec = spec
        self.length = length
        freqs = torch.arange(length, dtype=torch.float32)[:, None] * inverse_frequencies(spec)[None, :]
        angles = torch.cat((freqs, freqs), dim=-1)
        self.cos, self.sin = angles.cos(), angles.sin()

    def lookup(self, position_ids: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """Gather ``(B, S, head_dim)`` cos/sin for long ``position_ids`` ``(B, S)`` in ``[0, length)``,
        cast to ``dtype`` (trusted arguments). One row of consecutive positions (a prefill) is a slice
        of the table, not a copy: in float32 the result is a view of the shared table (read-only)."""
        start = int(position_ids[0, 0])
        if position_ids.shape[0] == 1 and torch.equal(
            position_ids[0], torch.arange(start, start + position_ids.shape[1])
        ):
            span = slice(start, start + position_ids.shape[1])
            return self.cos[span][None].to(dtype), self.sin[span][None].to(dtype)
        cos = torch.nn.functional.embedding(position_ids, self.cos)  # a row gather, much faster than indexing
        sin = torch.nn.functional.embedding(position_ids, self.sin)
        return cos.to(dtype), sin.to(dtype)


class RopeTables:
    """One :class:`RopeTable` per layer type of a model, for positions ``[0, max_seq)``."""

    def __init__(self, text_config: Any, max_seq: int) -> None:
        self.max_seq = positive_int(max_seq, "max_seq")
        view = read_text_config(text_config)
        if max_seq > view.max_position_embeddings:
            raise ValueError(
                f"max_seq={max_seq} exceeds the model's max_position_embeddings={view.max_position_embeddings}"
            )
        self.tables = {name: _cached_table(spec.rope, max_seq) for name, spec in view.type_specs}

    def __call__(
        self, position_ids: torch.Tensor, *, dtype: torch.dtype = torch.float32
    ) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """``{layer_type: (cos, sin)}``, each ``(B, S, head_dim_of_type)`` in ``dtype``."""
        dtype = floating_dtype(dtype)
        position_ids = position_ids_2d(position_ids)
        if int(position_ids.max()) >= self.max_seq:
            raise ValueError(
                f"position_ids reach {int(position_ids.max())}, beyond this table's {self.max_seq} positions"
            )
        return self.lookup(position_ids, dtype)

    def lookup(self, position_ids: torch.Tensor, dtype: torch.dtype) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """:meth:`__call__` for the runtime's own long ``(B, S)`` positions, without re-validating them."""
        return {name: table.lookup(position_ids, dtype) for name, table in self.tables.items()}


@lru_cache(maxsize=32)
def _cached_table(spec: RopeSpec, length: int) -> RopeTable:
    return RopeTable(spec, length)


def _table_length(max_position: int, limit: int) -> int:
    """Power-of-two table length covering ``max_position`` (so tables are reused across calls), at
    most ``limit``."""
    length = _MIN_TABLE_LENGTH
    while length <= max_position:
        length *= 2
    return min(length, limit)


def build_rope(
    text_config: Any, position_ids: torch.Tensor, *, dtype: torch.dtype = torch.float32
) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Per-layer-type RoPE for ``position_ids`` (``(B, S)`` or ``(S,)``, integer, non-negative).

    Returns ``{layer_type: (cos, sin)}`` with ``cos``/``sin`` of shape ``(B, S, head_dim_of_type)``
    in ``dtype``. Tables are cached per spec and power-of-two length, then sliced.
    """
    position_ids = position_ids_2d(position_ids)
    view = read_text_config(text_config)
    if int(position_ids.max()) >= view.max_position_embeddings:
        raise ValueError(
            f"position_ids reach {int(position_ids.max())}, beyond the model's "
            f"max_position_embeddings={view.max_position_embeddings}"
        )
    tables = RopeTables(view, _table_length(int(position_ids.max()), view.max_position_embeddings))
    return tables(position_ids, dtype=dtype)
