"""The static KV cache and the shared-KV producer/consumer map."""

from __future__ import annotations

import torch

from .config import TextConfigView


def kv_sources(view: TextConfigView) -> tuple[int, ...]:
    """For each layer, the index of the layer whose K/V it attends over (itself unless it reuses).

    A ``reuse`` layer reads the K/V stored by the last ``store`` layer of its own type.
    """
    stores = {view.layer_types[i]: i for i, mode in enumerate(view.kv_sharing_modes) if mode == "store"}
    return tuple(
        stores[layer_type] if mode == "reuse" else i
        for i, (layer_type, mode) in enumerate(zip(view.layer_types, view.kv_sharing_modes, strict=True))
    )


class StaticKVCache:
    """Per producing layer a ``(B, kv_heads, max_seq, head_dim_of_type)`` key and value buffer.

    Layers that reuse another layer's K/V hold no buffer. ``lengths`` ``(B,)`` counts the written
    slots per row; slot ``p`` holds absolute position ``p``.
    """

    def __init__(self, view: TextConfigView, *, batch_size: int, max_seq: int, dtype: torch.dtype) -> None:
        self.max_seq = max_seq
        self.sources = kv_sources(view)
        self.keys: dict[int, torch.Tensor] = {}
        self.values: dict[int, torch.Tensor] = {}
        for layer, source in enumerate(self.sources):
            if source == layer:
                spec = view.spec(view.layer_types[layer])
                shape = (batch_size, spec.num_kv_heads, max_seq, spec.head_dim)
                self.keys[layer] = torch.zeros(shape, dtype=dtype)
                self.values[layer] = torch.zeros(shape, dtype=dtype)
        self.lengths = torch.zeros(batch_size, dtype=torch.long)

    def reset(self) -> None:
        """Forget every written slot."""
        for buffer in (*self.keys.values(), *self.values.values()):
            buffer.zero_()
        self.lengths.zero_()

    def next_slots(self) -> torch.Tensor:
        """``(B,)`` the slot each row writes next (its length); ``ValueError`` ("cache is full") when a
        row already holds ``max_seq`` tokens."""
        full = self.lengths >= self.max_seq
        if full.any():
            raise ValueError(
                f"cache is full: rows {full.nonzero().flatten().tolist()} already hold max_seq={self.max_seq} "
                "tokens, nothing more can be decoded"
            )
        return self.lengths.clone()

    def write(
        self, layer: int, key: torch.Tensor, value: torch.Tensor, slots: torch.Tensor, keep: torch.Tensor
    ) -> None:
        """Write ``key``/``value`` ``(B, kv_heads, S, D)`` at ``slots (B, S)`` where ``keep (B, S)`` holds.

        Raises ``ValueError`` ("cache is full") for a slot at or past ``max_seq``.
        """
        if keep.any() and int(slots[keep].max()) >= self.max_seq:
            raise ValueError(
                f"cache is full: writing slot {int(slots[keep].max())} "
                f"but the static cache has max_seq={self.max_seq} slots"
            )
        rows, columns = keep.nonzero(as_tuple=True)
        targets = slots[rows, columns]
        self.keys[layer][rows, :, targets] = key[rows, :, columns]
        self.values[layer][rows, :, targets] = value[rows, :, columns]
