"""The host-side check groups of :mod:`.verify`, for any port that exposes the stage
(:class:`~gemma4_static.ports.host_stages.HostStages`): its static inputs, decode masks, its RoPE
(the ``rope`` hook's tables and the decode step's), its additive mask value, its K/V caches after a
prefill and after decode steps, and its exported graphs. A stage a port does not expose is one SKIP
row with the reason."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import torch

from ...ports.base import Gemma4Port, PortSetup
from ..checks import parity, parity_masks, tolerances
from ..checks.report import Row, merge, merge_by
from ..numerics.parity_numerics import hf_score_bound, mask_value_check
from ..references.hf import ATTN_IMPLEMENTATIONS, hf_rope
from ..references.layouts import valid_mask
from ..references.samples import Prompt
from .port_calls import guarded, port_prefill
from .session import Session

UNWRITTEN = 4  # static slots past a decode's position that must stay invisible


def static_input_rows(session: Session) -> Iterator[Row]:
    """The port's static inputs vs what HF's language model sees: for the sample prompt (as the port
    takes it), and for the same prompt with the video and audio placeholders in place of each row's
    last two text tokens (:func:`with_placeholders`; the image placeholder marks images, no text)."""

    def judged(what: str, prompt: Prompt) -> Row:
        compared = parity.static_input_row(prompt, *session.port.static_inputs(prompt), session.config)
        return dataclasses.replace(compared, check=f"{what}: {compared.check}")

    yield from guarded("static inputs", "sample prompt", lambda: [judged("sample prompt", session.port_prompt)])
    placed = with_placeholders(session.prompt, session.config).padded(session.port.limits.padding_side)
    if not torch.equal(placed.input_ids, session.port_prompt.input_ids):
        yield from guarded("static inputs", "placeholders", lambda: [judged("video and audio placeholders", placed)])


def with_placeholders(prompt: Prompt, config: Any) -> Prompt:
    """``prompt`` (right-padded) with the model's video and audio placeholder ids in place of each
    row's last text tokens (never its first token, an image's placeholders or its ``boi``/``eoi``)."""
    placeholders = [getattr(config, field, None) for field in ("video_token_id", "audio_token_id")]
    placeholders = [value for value in placeholders if value is not None]
    ids = prompt.input_ids.clone()
    for row in range(ids.shape[0]):
        for position, value in zip(prompt.text_positions(row)[::-1], placeholders, strict=False):
            ids[row, position] = value
    return dataclasses.replace(prompt, input_ids=ids)


def decode_positions(window: int) -> list[int]:
    """Past lengths around the window edges a decode step is checked at."""
    return sorted({1, window - 1, window, window + 1, 2 * window + 3})


def decode_mask_rows(session: Session) -> Iterator[Row]:
    """The port's decode masks vs HF with a ``DynamicCache``, as the absolute positions the new token
    sees after conversations of lengths around the window edges (one unpadded row; three left-padded
    ones too where the port pads, the layout HF's batched decode uses); slots past the new token must
    stay invisible."""
    positions, limits = decode_positions(session.window), session.port.limits
    layouts = [("none", 1)]
    if limits.padding_side is not None and (limits.max_batch is None or limits.max_batch >= 3):
        layouts.append(("left", 3))
    setup = PortSetup(session.static_length(max(positions) + 2 + UNWRITTEN), max(batch for _, batch in layouts))
    with session.built(setup) as port:
        for attn_implementation in ATTN_IMPLEMENTATIONS:
            rows = [
                row
                for position in positions
                for padding, batch in layouts
                for row in parity_masks.decode_mask_rows(
                    session.config, valid_mask(padding, batch, position + 1), attn_implementation, port.decode_masks
                )
            ]
            yield from merge_by(rows, lambda row: f"{row.check} (positions {positions})")


def rope_rows(session: Session) -> Iterator[Row]:
    """The port's RoPE per layer type and dtype vs ``Gemma4TextRotaryEmbedding``, positions ``[0, 4100)``
    (up to the port's ``max_seq``), and its decode-step RoPE (:func:`.verify_host.decode_rope_rows`)."""
    length = session.capped(tolerances.ROPE_POSITIONS)
    positions = torch.arange(length)[None]
    with session.built(PortSetup(length)) as port:  # a static port's tables are max_seq long
        for dtype in tolerances.ROPE:
            rows = lambda dtype=dtype: parity.rope_rows(session.config, port.rope, positions, dtype)  # noqa: E731
            yield from guarded("RoPE", str(dtype).removeprefix("torch."), rows)
        capacity = port.limits.capacity(length)
        yield from guarded("RoPE decode", "per layer type", lambda: decode_rope_rows(session, port, capacity))


def decode_rope_rows(session: Session, port: Gemma4Port, capacity: int) -> Iterator[Row]:
    """``port``'s decode-step RoPE (it holds ``capacity`` tokens) at positions around the window edges
    and at its last position vs ``Gemma4TextRotaryEmbedding`` there, per layer type and dtype."""
    window, last = session.window, capacity - 1
    positions = sorted({*(p for p in decode_positions(window) if p <= last), last})
    for dtype in tolerances.ROPE:
        name = str(dtype).removeprefix("torch.")
        rows = []
        for position in positions:
            ours = port.decode_rope(position, dtype)
            theirs = {
                layer_type: tuple(table[:, :1] for table in pair)
                for layer_type, pair in hf_rope(session.config, torch.tensor([[position]]), dtype=dtype).items()
            }
            rows += parity.rope_pairs_rows("RoPE decode", name, ours, theirs, dtype)
        yield from merge_by(rows, lambda row, name=name: f"{row.check} (positions {positions})")


def mask_value_rows(session: Session) -> Iterator[Row]:
    """The port's additive mask value against the score range the model's layers can produce, over
    the keys of its static length (:func:`..numerics.parity_numerics.mask_value_check`)."""
    port = session.port
    rows = mask_value_check(port.mask_fill_value(), session.dtype, session.setup.max_seq, hf_score_bound(session.model))
    yield rows[0]
    if port.limits.padding_side is None:  # no padding, so no query row all masked for an overflow to turn to NaN
        yield dataclasses.replace(rows[1], skipped=f"{port.name} takes no padding: no query row is ever all masked")
    else:
        yield rows[1]


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


def export_rows(session: Session) -> Iterator[Row]:
    """The graphs the port exports, each exported with ``torch.export`` (after a prefill of the sample
    prompt and a decode step, whose inputs a port may capture) replaying its eager output."""
    port = session.port
    again = port_prefill(port, session.port_prompt)
    if isinstance(again, Exception):
        raise again
    port.decode(again.logits.argmax(dim=-1, keepdim=True))
    cases = port.export_cases()
    yield merge(parity.export_rows(cases), "export round-trip", f"{len(cases)} graphs, exported vs eager")
