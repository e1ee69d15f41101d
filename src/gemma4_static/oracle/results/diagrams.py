"""Mask mismatches drawn as text: the first query rows where ours and HF's differ, side by side.

``x`` = the query may attend to that key, ``.`` = masked; in the ``diff`` column ``x`` marks a key
the two sides disagree on. Columns are absolute key positions (a window of them around the first
difference when the mask is wide)."""

from __future__ import annotations

import torch

from .report import counted

MAX_ROWS = 4
MAX_COLUMNS = 40


def _bits(row: torch.Tensor) -> str:
    return "".join("x" if allowed else "." for allowed in row.tolist())


def mask_diagram(ours: torch.Tensor, theirs: torch.Tensor, valid: torch.Tensor, label: str) -> str:
    """The first differing batch row of boolean masks ``(B, 1, Q, K)`` as text (``""`` if equal):
    its padding layout (``valid (B, K)``, ``1`` = a real token), then up to :data:`MAX_ROWS`
    differing query rows, ours / HF / where they differ."""
    differ = ours != theirs
    if not differ.any():
        return ""
    batch_row = int(differ.flatten(1).any(dim=1).nonzero()[0])
    rows = differ[batch_row, 0].any(dim=1).nonzero().flatten()
    first_key = int(differ[batch_row, 0].any(dim=0).nonzero()[0])
    start = max(0, min(first_key - MAX_COLUMNS // 4, ours.shape[-1] - MAX_COLUMNS))
    keys = slice(start, start + MAX_COLUMNS)
    width = len(_bits(ours[batch_row, 0, 0, keys]))
    differing = f"{counted(len(rows), 'query row')} {'differs' if len(rows) == 1 else 'differ'}"
    lines = [
        f"{label}: batch row {batch_row}, {differing}; keys {start}..{start + width - 1}",
        f"  padding     {''.join(str(int(v)) for v in valid[batch_row, keys].tolist())}",
        f"  query  {'ours':<{width}}  {'HF':<{width}}  diff",
    ]
    for query in rows[:MAX_ROWS].tolist():
        mine, reference = ours[batch_row, 0, query, keys], theirs[batch_row, 0, query, keys]
        lines.append(f"  {query:>5}  {_bits(mine)}  {_bits(reference)}  {_bits(mine != reference)}")
    return "\n".join(lines)
