"""The static KV cache: buffers per producing layer, each row's length, and where each position lives.

Two layouts for sliding layers (``sliding_cache``): ``"ring"`` keeps ``R = min(sliding_window,
max_seq)`` slots and writes position ``p`` to slot ``p mod R``; ``"full"`` keeps ``max_seq`` slots,
slot ``p`` = position ``p``. Full-attention layers always keep ``max_seq`` slots. Which absolute
position a slot holds comes from :meth:`StaticKVCache.key_positions`; masks are built from those
positions, never from the slot index.
"""

from __future__ import annotations

import torch

from ..spec import SLIDING_ATTENTION, TextConfigView

SLIDING_CACHES = ("ring", "full")


class StaticKVCache:
    """Per producing layer a ``(B, kv_heads, capacity, head_dim_of_type)`` key and value buffer.

    Layers that reuse another layer's K/V (``sources[layer] != layer``) hold no buffer. The cache
    owns ``lengths`` ``(B,)``, the positions written per row (a right-padded prefix ``[0, length)``).
    """

    def __init__(
        self, view: TextConfigView, *, batch_size: int, max_seq: int, dtype: torch.dtype, sliding_cache: str = "ring"
    ) -> None:
        self.max_seq = max_seq
        self.sources = view.kv_sources
        self.layer_types = view.layer_types
        self.capacity = {name: max_seq for name in view.unique_layer_types}
        if sliding_cache == "ring" and SLIDING_ATTENTION in self.capacity:
            self.capacity[SLIDING_ATTENTION] = min(view.sliding_window, max_seq)
        self.keys: dict[int, torch.Tensor] = {}
        self.values: dict[int, torch.Tensor] = {}
        for layer, source in enumerate(self.sources):
            if source == layer:
                spec = view.spec(view.layer_types[layer])
                shape = (batch_size, spec.num_kv_heads, self.capacity[view.layer_types[layer]], spec.head_dim)
                self.keys[layer] = torch.zeros(shape, dtype=dtype)
                self.values[layer] = torch.zeros(shape, dtype=dtype)
        self.lengths = torch.zeros(batch_size, dtype=torch.long)

    def is_ring(self, layer_type: str) -> bool:
        """Whether ``layer_type``'s buffers wrap (fewer slots than ``max_seq``)."""
        return self.capacity[layer_type] < self.max_seq

    def reset(self, lengths: torch.Tensor | None = None) -> None:
        """Forget every written slot; a prefill then states how many it writes per row (``(B,)``)."""
        for buffer in (*self.keys.values(), *self.values.values()):
            buffer.zero_()
        if lengths is None:
            self.lengths.zero_()
        else:
            self.lengths.copy_(lengths)

    def advance(self) -> torch.Tensor:
        """Claim one more position per row for a decode step and return it ``(B,)`` (the old lengths).

        Raises ``ValueError`` ("cache is full") without changing anything when a row already holds
        ``max_seq`` tokens (the full-attention layers have no slot left; a ring never fills).
        """
        full = self.lengths >= self.max_seq
        if full.any():
            raise ValueError(
                f"cache is full: rows {full.nonzero().flatten().tolist()} already hold max_seq={self.max_seq} "
                "tokens, nothing more can be decoded"
            )
        positions = self.lengths.clone()
        self.lengths += 1
        return positions

    def slots(self, layer_type: str, positions: torch.Tensor) -> torch.Tensor:
        """The slots of absolute ``positions`` in ``layer_type``'s buffers (``p mod R`` on a ring)."""
        return positions % self.capacity[layer_type] if self.is_ring(layer_type) else positions

    def key_positions(self, layer_type: str, upto: torch.Tensor) -> torch.Tensor:
        """``(B, capacity)``: the absolute position each slot holds once positions ``[0, upto)`` of each
        row are written (``upto (B,)``), ``-1`` for an empty slot. On a ring, slot ``s`` holds the last
        position ``p < upto`` with ``p mod R = s``."""
        capacity = self.capacity[layer_type]
        slots = torch.arange(capacity)[None, :]
        held = slots + capacity * torch.div(upto[:, None] - 1 - slots, capacity, rounding_mode="floor")
        return torch.where((held >= 0) & (held < upto[:, None]), held, -1)

    def buffers(self, layer: int, extra: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """The K/V ``layer`` attends over (its producer's), with ``extra`` empty slots appended (where a
        chunk's own K/V go, so a chunk longer than a ring never overwrites keys it still needs)."""
        source = self.sources[layer]
        key, value = self.keys[source], self.values[source]
        if not extra:
            return key, value
        empty = key.new_zeros((*key.shape[:2], extra, key.shape[3]))
        return torch.cat((key, empty), dim=2), torch.cat((value, empty), dim=2)

    def kept(self, layer_type: str, positions: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        """``(B, S)`` bool: which of the ``keep`` positions a write keeps; on a ring only each row's last
        ``R`` kept positions (earlier ones would be overwritten in the same write)."""
        if not self.is_ring(layer_type):
            return keep
        last = torch.where(keep, positions, -1).max(dim=1, keepdim=True).values
        return keep & (positions > last - self.capacity[layer_type])

    def write_plan(self, positions: torch.Tensor, keep: torch.Tensor) -> dict[str, tuple[torch.Tensor, ...]]:
        """Where a write of absolute ``positions (B, S)`` goes where ``keep (B, S)`` holds
        (:meth:`kept`), per layer type: ``(rows, columns, slots)`` of the kept entries, computed once
        for every layer of a call. Raises ``ValueError`` ("cache is full") for a position at or past
        ``max_seq``."""
        if keep.any() and int(positions[keep].max()) >= self.max_seq:
            raise ValueError(
                f"cache is full: writing position {int(positions[keep].max())} "
                f"but the static cache has max_seq={self.max_seq} slots"
            )
        plan = {}
        for layer_type in dict.fromkeys(self.layer_types):
            rows, columns = self.kept(layer_type, positions, keep).nonzero(as_tuple=True)
            plan[layer_type] = (rows, columns, self.slots(layer_type, positions)[rows, columns])
        return plan

    def write(
        self, layer: int, key: torch.Tensor, value: torch.Tensor, positions: torch.Tensor, keep: torch.Tensor
    ) -> None:
        """Write ``key``/``value`` ``(B, kv_heads, S, D)`` of absolute ``positions (B, S)`` where ``keep
        (B, S)`` holds (:meth:`write_plan`, whose ``ValueError`` it raises)."""
        self.write_planned(layer, key, value, self.write_plan(positions, keep))

    def write_planned(
        self, layer: int, key: torch.Tensor, value: torch.Tensor, plan: dict[str, tuple[torch.Tensor, ...]]
    ) -> None:
        """Write ``key``/``value`` ``(B, kv_heads, S, D)`` where ``plan`` (:meth:`write_plan` of the
        call's positions) puts them."""
        rows, columns, targets = plan[self.layer_types[layer]]
        self.keys[layer][rows, :, targets] = key[rows, :, columns]
        self.values[layer][rows, :, targets] = value[rows, :, columns]
