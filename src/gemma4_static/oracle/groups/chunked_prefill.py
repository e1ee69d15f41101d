"""The ``chunked-prefill`` check group: a text prompt longer than two windows prefilled in chunks of
``W + 1`` (this runtime: over its ring caches) against HF: the logits and, where the port exposes
its cache, the K/V of every row and producing layer (in a low-precision profile against float64,
the logits under the token rule too)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

from ...ports import PortSetup
from ...ports.capabilities.host_stages import KV_CACHE
from ..checks import parity
from ..numerics import parity_numerics
from ..references.hf import hf_last_logits
from ..references.samples import Prompt, text_prompt
from ..results.report import Row, merge, skip_row
from ..session.port_calls import guarded
from ..session.sample_plan import SEEDS
from ..session.session import Session
from . import CheckGroup
from ._shared import kv_rows_vs_float64

FP32 = torch.float32


def chunked_prefill_rows(session: Session) -> Iterator[Row]:
    """A text prompt longer than two windows prefilled in chunks of ``W + 1`` (this runtime: over
    its ring caches), against HF: the logits and, where the port exposes its cache, the K/V of every
    row and producing layer (low precision: against float64, :func:`low_precision_rows`)."""
    limits = session.under_test.limits
    if not limits.chunks.chunked:
        yield skip_row("chunked prefill", "chunks of W + 1", f"{session.port.name} does not prefill in chunks")
        return
    if limits.images.required:
        yield skip_row("chunked prefill", "chunks of W + 1", f"{session.port.name} needs an image in every prompt")
        return
    window, chunk = session.window, session.window + 1
    lengths = [2 * window + 3] if limits.batch.single_row else [2 * window + 3, max(1, window - 1)]
    prompt = text_prompt(session.config, lengths, seed=SEEDS["chunked prompt"])
    max_seq = 3 * chunk  # the 2W + 3 tokens take three chunks of W + 1
    with session.built(PortSetup(max_seq, prompt.input_ids.shape[0], prefill_schedule=(chunk,))) as port:
        ours = port.prefill(prompt.padded(limits.batch.padding_side)).logits
        check = f"chunks of {chunk}"
        if session.low_precision:
            yield from low_precision_rows(session, port, prompt, ours, check)
            return
        theirs = hf_last_logits(session.model, prompt)
        yield parity.stage_row(
            "chunked prefill", f"{check}, logits of the last valid tokens", ours, theirs, session.dtype
        )
        kv_check = f"{check}, K/V of every row vs HF cache"
        kv = guarded("chunked prefill", kv_check, lambda: parity.kv_rows(port, session.model, prompt, FP32))
        yield kv[0] if kv[0].skipped else merge(kv, "chunked prefill", kv_check)


def low_precision_rows(session: Session, port: Any, prompt: Prompt, ours: torch.Tensor, check: str) -> Iterator[Row]:
    """A chunked prefill's last-token logits ``ours (B, vocab)`` and its cache against float64 (HF's
    same-dtype figures beside), the logits under the token rule too."""
    gate = session.gate
    reference, hf = (hf_last_logits(model, prompt) for model in (session.reference_model, session.hf_model))
    stage = "chunked prefill"
    yield from parity_numerics.metric_rows(stage, f"{check}, last valid token per row", ours, hf, reference, gate)
    bound, text = gate.token_bound(reference), gate.bound_text
    yield from parity_numerics.decision_rows(
        stage, check, ours, reference, bound, text, lambda row: f"row {row}", hf=hf
    )
    yield from kv_rows_vs_float64(session, stage, port, prompt, f"{check}, ")


GROUP = CheckGroup(
    name="chunked-prefill",
    order=100,
    describe="a prompt longer than two windows prefilled in chunks of W + 1 against HF: the logits and every row's K/V",
    rows=chunked_prefill_rows,
    reads=(KV_CACHE,),
)
