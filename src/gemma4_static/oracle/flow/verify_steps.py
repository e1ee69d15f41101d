"""The check groups that run a port step by step: a chunked prefill, decode steps and greedy
generation against HF (low precision: against float64, :mod:`.verify_numerics`)."""

from __future__ import annotations

from collections.abc import Iterator

import torch

from ...ports.base import PortSetup
from ..checks import parity
from ..checks.report import Row, merge, merge_by, skip_row
from ..references.hf import hf_prefill
from ..references.samples import text_prompt
from . import verify_numerics
from .session import Session, guarded

FP32 = torch.float32


def decode_rows(session: Session) -> Iterator[Row]:
    """``steps`` decode steps per row vs HF's DynamicCache, then greedy generation vs HF generate."""
    prompt, port, steps = session.prompt, session.port, session.steps
    batch = prompt.input_ids.shape[0]
    vocab = session.config.get_text_config().vocab_size
    tokens = torch.randint(3, min(vocab, 400), (batch, steps), generator=torch.Generator().manual_seed(1))
    if session.low_precision:
        yield from verify_numerics.decode_rows(session, tokens)
        return
    with session.recording():
        decoded = guarded(
            "decode steps", "decode", lambda: parity.decode_rows(session.model, port, prompt, tokens, session.dtype)
        )
        generated = guarded(
            "generation", "greedy", lambda: parity.generation_rows(session.model, port, prompt, max_new_tokens=steps)
        )
    if decoded[0].skipped:
        yield from decoded
    else:
        yield from merge_by(decoded, lambda row: f"{batch} rows x {steps} steps, {row.metric}")
    yield from generated


def chunked_prefill_rows(session: Session) -> Iterator[Row]:
    """A text prompt longer than two windows prefilled in chunks of ``W + 1`` (this runtime: over
    its ring caches), against HF: the logits and, for this runtime, the K/V of every row and
    producing layer (low precision: against float64, :func:`.verify_numerics.chunked_prefill_rows`)."""
    limits = session.port.limits
    if not limits.chunked_prefill:
        yield skip_row("chunked prefill", "chunks of W + 1", f"{session.port.name} does not prefill in chunks")
        return
    window, chunk = session.window, session.window + 1
    single = limits.max_batch == 1 or limits.padding_side is None
    prompt = text_prompt(session.config, [2 * window + 3] if single else [2 * window + 3, max(1, window - 1)], seed=3)
    max_seq = -(-(2 * window + 3) // chunk) * chunk
    port = session.build_port(PortSetup(max_seq, prompt.input_ids.shape[0], prefill_chunk=chunk))
    ours = port.prefill(prompt).logits
    check = f"chunks of {chunk}"
    if session.low_precision:
        yield from verify_numerics.chunked_prefill_rows(session, port, prompt, ours, check)
        return
    rows = torch.arange(prompt.input_ids.shape[0])
    theirs = hf_prefill(session.model, prompt).logits[rows, prompt.last_index]
    yield parity.stage_row("chunked prefill", f"{check}, logits of the last valid tokens", ours, theirs, session.dtype)
    kv_check = f"{check}, K/V of every row vs HF cache"
    if not session.is_runtime:
        yield skip_row("chunked prefill", kv_check, f"{session.port.name} does not expose its cache")
        return
    kv = guarded("chunked prefill", kv_check, lambda: parity.kv_rows(port.runtime, session.model, prompt, FP32))
    yield kv[0] if kv[0].skipped else merge(kv, "chunked prefill", kv_check)
