"""Ports with Circle graphs of their own to ship, around this runtime seen from outside: attention of
two heads as TICO's decoder layers compute it, its mask given rank 3 (``CircleAttention``: correct)
or squeezed from rank 4 before the add (``CircleMaskSqueezed``: a reshape TICO 0.3.0's
``RemoveRedundantReshapePattern3`` drops, leaving a malformed graph)."""

from __future__ import annotations

import torch

from gemma4_static.export import StageCase
from gemma4_static.oracle.faults.host_faults import HostStagesPort


class MaskedAttention(torch.nn.Module):
    """Two heads of attention as TICO's decoder layers compute them: ``q, k, v (2, S, D)`` and an
    additive mask, ``(1, 1, S, S)`` squeezed to rank 3 before the add where ``squeezed`` (else given
    ``(1, S, S)``), the heads concatenated on the last dim: ``(1, S, 2 D)``."""

    def __init__(self, *, squeezed: bool) -> None:
        super().__init__()
        self.squeezed = squeezed

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        scores = q @ k.transpose(1, 2) + (mask.squeeze(1) if self.squeezed else mask)
        out = torch.softmax(scores, dim=-1) @ v
        return torch.cat([out[0:1], out[1:2]], dim=2)


def masked_attention_case(*, squeezed: bool, length: int = 8) -> StageCase:
    """:class:`MaskedAttention` on seeded inputs of ``length`` tokens and 4 dims per head, causal."""
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, length, 4, generator=generator) for _ in range(3))
    mask = torch.triu(torch.full((length, length), -1e9), 1)[None, None]
    return StageCase("attention", MaskedAttention(squeezed=squeezed), (q, k, v, mask if squeezed else mask[0]))


class CircleAttention(HostStagesPort):
    """This runtime with a Circle graph of its own to ship: attention whose mask comes in rank 3."""

    name = "wrapped gemma4-static, one Circle graph"

    def circle_cases(self) -> list[StageCase]:
        return [masked_attention_case(squeezed=False)]


class CircleMaskSqueezed(CircleAttention):
    """Its Circle graph squeezes the attention mask from rank 4 to 3 before the add: malformed as shipped."""

    name = "wrapped gemma4-static, one Circle graph its mask squeezed"

    def circle_cases(self) -> list[StageCase]:
        return [masked_attention_case(squeezed=True)]
