"""Single-shot prefill masks kept in buffers between calls, rewritten only where the padding changed.

A runtime prefilling prompt after prompt into one static shape writes the same ``(B, 1, S, S)``
additive masks every time, except in the key columns whose validity differs from the last call.
:class:`PrefillMaskBuffers` keeps one buffer per layer type, always equal to
``minimum(rule table, key padding of the last valid mask)`` (what
:func:`~gemma4_static.cpu.masks.build_prefill_masks` returns). A call compares the new valid mask
with the last one and, per row and per run of changed columns, fills the columns that became padding
with the forbidden value or copies the columns that became valid back from the rule table, over
only the rows the rule lets see those columns (a causal column ``k`` is seen by rows ``q >= k``, a
sliding one by ``q < k + window``). More than ``MAX_CHANGED_RUNS`` runs in a row (padding holes
everywhere) take one full ``minimum`` pass instead.

The returned tensors *are* the buffers: valid until the next call, never to be written by the caller.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import torch

from ..spec import read_text_config
from .checks import floating_dtype, mask_fill_value, positive_int, valid_token_mask
from .masks import MaskTable, additive_rules, mask_table, to_additive

MAX_CHANGED_RUNS = 16  # runs of changed columns per row before one full pass is cheaper
COLUMN_BLOCK = 128  # key columns per rewritten block (each block over the rows that see it)


@lru_cache(maxsize=16)
def seeing_rows(table: MaskTable) -> dict[str, list[tuple[int, int]]]:
    """``{layer_type: [(top, bottom), ...]}``: per block of ``COLUMN_BLOCK`` key columns, the rows
    ``[top, bottom)`` that hold every query the rule lets see a column of the block (``top >=
    bottom``: none)."""
    spans = {}
    for name, rule in table.rules.items():
        spans[name] = []
        for block in rule.split(COLUMN_BLOCK, dim=1):
            rows = torch.nonzero(block.any(dim=1)).flatten()
            spans[name].append((int(rows[0]), int(rows[-1]) + 1) if len(rows) else (0, 0))
    return spans


def _runs(columns: torch.Tensor) -> list[tuple[int, int]]:
    """``[(start, end), ...]`` of the runs of ``True`` in the 1-D boolean ``columns``."""
    edges = torch.diff(
        columns.to(torch.int8),
        prepend=columns.new_zeros(1, dtype=torch.int8),
        append=columns.new_zeros(1, dtype=torch.int8),
    )
    bounds = torch.nonzero(edges).flatten().tolist()
    return list(zip(bounds[0::2], bounds[1::2], strict=True))


class PrefillMaskBuffers:
    """Additive prefill masks ``{layer_type: (batch_size, 1, max_seq, max_seq)}`` in ``dtype``
    (``0.0`` allowed, ``mask_value`` forbidden; default per dtype), kept and updated in place.

    Call it with the ``(batch_size, max_seq)`` valid-token mask; the buffers are allocated on the
    first call. The result equals :func:`~gemma4_static.cpu.masks.build_prefill_masks` for the same
    mask (no vision overlay) and is overwritten by the next call.
    """

    def __init__(
        self,
        text_config: Any,
        max_seq: int,
        *,
        batch_size: int = 1,
        dtype: torch.dtype = torch.float32,
        mask_value: float | None = None,
    ) -> None:
        self.max_seq = positive_int(max_seq, "max_seq")
        self.batch_size = positive_int(batch_size, "batch_size")
        self.dtype = floating_dtype(dtype)
        self.fill = mask_fill_value(mask_value, self.dtype)
        self.table = mask_table(read_text_config(text_config), self.max_seq)
        self.buffers: dict[str, torch.Tensor] = {}
        self.valid = torch.ones(self.batch_size, self.max_seq, dtype=torch.bool)

    def __call__(self, attention_mask: torch.Tensor) -> dict[str, torch.Tensor]:
        """Masks for ``attention_mask`` (bool, or integer 0/1), ``(batch_size, max_seq)``."""
        valid = valid_token_mask(attention_mask)
        if tuple(valid.shape) != (self.batch_size, self.max_seq):
            raise ValueError(
                f"attention_mask must have shape (batch_size, max_seq) = {(self.batch_size, self.max_seq)}, "
                f"got {tuple(valid.shape)}"
            )
        return self.write(valid)

    def write(self, valid: torch.Tensor) -> dict[str, torch.Tensor]:
        """:meth:`__call__` for the runtime's own ``(batch_size, max_seq)`` bool mask (trusted)."""
        rules = additive_rules(self.table, self.dtype, self.fill)
        if not self.buffers:
            shape = (self.batch_size, 1, self.max_seq, self.max_seq)
            self.buffers = {name: rule.expand(shape).clone() for name, rule in rules.items()}
        changed = valid != self.valid
        for row in torch.nonzero(changed.any(dim=1)).flatten().tolist():
            padded = _runs(changed[row] & ~valid[row])
            restored = _runs(changed[row] & valid[row])
            if len(padded) + len(restored) > MAX_CHANGED_RUNS:
                key_padding = to_additive(valid[row], dtype=self.dtype, mask_value=self.fill)
                for name, rule in rules.items():
                    torch.minimum(rule, key_padding, out=self.buffers[name][row, 0])
                continue
            for name, spans in seeing_rows(self.table).items():
                buffer, rule = self.buffers[name][row, 0], rules[name]
                self._rewrite(buffer, rule, spans, padded, restore=False)
                self._rewrite(buffer, rule, spans, restored, restore=True)
        self.valid = valid.clone()
        return dict(self.buffers)

    def _rewrite(
        self,
        buffer: torch.Tensor,
        rule: torch.Tensor,
        spans: list[tuple[int, int]],
        runs: list[tuple[int, int]],
        *,
        restore: bool,
    ) -> None:
        """Columns ``runs`` of one ``(S, S)`` buffer, block by block over the rows that see them:
        copied back from ``rule`` (``restore``) or forbidden."""
        for start, end in runs:
            for block in range(start // COLUMN_BLOCK, (end - 1) // COLUMN_BLOCK + 1):
                top, bottom = spans[block]
                if top >= bottom:
                    continue
                columns = slice(max(start, block * COLUMN_BLOCK), min(end, (block + 1) * COLUMN_BLOCK))
                if restore:
                    buffer[top:bottom, columns].copy_(rule[top:bottom, columns])
                else:
                    buffer[top:bottom, columns].fill_(self.fill)
