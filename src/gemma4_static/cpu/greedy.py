"""The greedy loop of HF's ``generate``, once, for the runtime and for any port."""

from __future__ import annotations

from collections.abc import Callable

import torch


def greedy(
    logits: torch.Tensor,
    decode: Callable[[torch.Tensor], torch.Tensor],
    *,
    max_new_tokens: int,
    eos: torch.Tensor,
    pad_token_id: int,
) -> torch.Tensor:
    """The new tokens ``(B, max_new_tokens)`` from the prefill's ``logits (B, vocab)``, each step's
    argmax fed to ``decode((B, 1)) -> (B, vocab)``; a row that produced an id of ``eos`` ``(E,)``
    continues with ``pad_token_id`` while the others go on; the loop stops once every row has."""
    batch = logits.shape[0]
    tokens = torch.full((batch, max_new_tokens), pad_token_id, dtype=torch.long)
    finished = torch.zeros(batch, dtype=torch.bool)
    for step in range(max_new_tokens):
        token = torch.where(finished, pad_token_id, logits.argmax(dim=-1))
        tokens[:, step] = token
        finished |= torch.isin(token, eos)
        if step + 1 == max_new_tokens or bool(finished.all()):
            break
        logits = decode(token[:, None])
    return tokens
