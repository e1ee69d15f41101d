"""The static KV cache: buffers per producing layer and each row's length (its next slot)."""

from __future__ import annotations

import torch

from ..spec import TextConfigView


class StaticKVCache:
    """Per producing layer a ``(B, kv_heads, max_seq, head_dim_of_type)`` key and value buffer.

    Layers that reuse another layer's K/V (``sources[layer] != layer``) hold no buffer. The cache
    owns ``lengths`` ``(B,)``, the written slots per row; slot ``p`` holds absolute position ``p``.
    """

    def __init__(self, view: TextConfigView, *, batch_size: int, max_seq: int, dtype: torch.dtype) -> None:
        self.max_seq = max_seq
        self.sources = view.kv_sources
        self.keys: dict[int, torch.Tensor] = {}
        self.values: dict[int, torch.Tensor] = {}
        for layer, source in enumerate(self.sources):
            if source == layer:
                spec = view.spec(view.layer_types[layer])
                shape = (batch_size, spec.num_kv_heads, max_seq, spec.head_dim)
                self.keys[layer] = torch.zeros(shape, dtype=dtype)
                self.values[layer] = torch.zeros(shape, dtype=dtype)
        self.lengths = torch.zeros(batch_size, dtype=torch.long)
        self._slots = torch.arange(max_seq)

    def reset(self, lengths: torch.Tensor | None = None) -> None:
        """Forget every written slot; a prefill then states how many it writes per row (``(B,)``)."""
        for buffer in (*self.keys.values(), *self.values.values()):
            buffer.zero_()
        if lengths is None:
            self.lengths.zero_()
        else:
            self.lengths.copy_(lengths)

    def advance(self) -> torch.Tensor:
        """Claim one more slot per row for a decode step and return it ``(B,)`` (the old lengths).

        Raises ``ValueError`` ("cache is full") without changing anything when a row already holds
        ``max_seq`` tokens.
        """
        full = self.lengths >= self.max_seq
        if full.any():
            raise ValueError(
                f"cache is full: rows {full.nonzero().flatten().tolist()} already hold max_seq={self.max_seq} "
                "tokens, nothing more can be decoded"
            )
        slots = self.lengths.clone()
        self.lengths += 1
        return slots

    def valid_slots(self) -> torch.Tensor:
        """``(B, max_seq)`` bool: the slots each row has written."""
        return self._slots[None, :] < self.lengths[:, None]

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
