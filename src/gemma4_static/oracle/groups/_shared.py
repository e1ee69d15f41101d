"""What several check groups share: the decode positions around the window edges (decode masks,
decode RoPE), and the K/V a port's cache holds against HF's cache (after the prefill: ``layers``;
after decode steps: ``decode``; in a low-precision profile against float64 too: ``layers`` and
``chunked-prefill``), and the port after a decode step (the inputs its graphs capture: ``export``,
``circle``)."""

from __future__ import annotations

from collections.abc import Iterator
from operator import attrgetter
from typing import Any

import torch

from ...ports import NotExposed
from ..checks import parity
from ..numerics import parity_numerics
from ..references.hf_cache import paired_kv
from ..references.samples import Prompt
from ..results.report import Row, merge, merge_by, skip_row
from ..session.port_calls import port_prefill
from ..session.session import Session


def after_a_decode_step(session: Session) -> None:
    """The port after a prefill of the sample prompt and one greedy decode step (the inputs a port's
    graphs capture: its export and Circle cases)."""
    again = port_prefill(session.port, session.port_prompt)
    if isinstance(again, Exception):
        raise again
    session.port.decode(again.logits.argmax(dim=-1, keepdim=True))


def decode_positions(window: int) -> list[int]:
    """Past lengths around the window edges a decode step is checked at."""
    return sorted({1, window - 1, window, window + 1, 2 * window + 3})


def kv_rows(session: Session, tokens: torch.Tensor | None = None) -> Iterator[Row]:
    """K and V the port's cache holds after its prefill of the sample prompt (and ``tokens (B, T)``
    decoded after it) vs HF's cache of each row, merged per kind."""
    prompt, port = session.port_prompt, session.port
    when = "after the prefill" if tokens is None else f"after {tokens.shape[1]} decode steps"
    again = port_prefill(port, prompt)  # the cache of the sample prompt, whatever ran since
    if isinstance(again, Exception):
        raise again
    if tokens is not None:
        parity.port_decode(port, tokens)
    rows = parity.kv_rows(port, session.model, session.prompt, session.dtype, tokens)
    for kind in ("K", "V"):
        chosen = [row for row in rows if row.check.endswith(kind)]
        yield merge(chosen, "KV cache", f"{kind} of {len(chosen)} layers {when} vs HF cache")


def kv_rows_vs_float64(session: Session, stage: str, port: Any, prompt: Prompt, prefix: str) -> Iterator[Row]:
    """K and V of every producing layer and row of ``port``'s cache after prefilling ``prompt``,
    against HF's caches (float64 and same dtype), merged per kind and metric (a SKIP row for a port
    that does not expose its cache)."""
    gate = session.gate
    try:
        kv_ref = paired_kv(port.cache_kv, session.reference_model, prompt)
    except NotExposed as reason:
        yield skip_row(stage, f"{prefix}K/V of every producing layer", str(reason))
        return
    kv_hf = paired_kv(port.cache_kv, session.hf_model, prompt)
    for kind in ("K", "V"):
        rows = [
            row
            for (name, mine, reference), (_, _, hf) in zip(kv_ref, kv_hf, strict=True)
            if name.endswith(kind)
            for row in parity_numerics.metric_rows(stage, name, mine, hf, reference, gate)
        ]
        yield from merge_by(rows, attrgetter("metric"), f"{prefix}{kind} of every producing layer and row")
