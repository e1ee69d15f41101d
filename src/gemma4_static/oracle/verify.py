"""The side-by-side verification flow: every parity check of :mod:`.parity` on one model, merged
into report rows (stage, check, metric, value, tolerance, PASS/FAIL)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch

from ..export import stage_cases
from ..runtime import StaticGemma4Runtime
from . import overflow, parity, parity_numerics, parity_vision, tolerances, verify_numerics
from .hf import hf_prefill
from .overflow import recorded_ranges
from .report import Row, merge
from .samples import text_prompt
from .session import LAYER_GROUP, Session, open_session
from .verify_masks import chunk_mask_rows, decode_mask_rows, prefill_mask_rows, vision_mask_rows


def input_rows(session: Session) -> Iterator[Row]:
    """Static inputs, token embedding, PLE, vision prefill and fusion vs what HF computes."""
    if session.dtype != torch.float32:
        yield from verify_numerics.input_rows(session)
        return
    ours = session.ours
    yield parity.static_input_row(session.prompt, ours, session.runtime.spec)
    yield parity.embedding_row(session.model, session.runtime, ours.inputs.input_ids)
    yield parity.ple_row(session.model, ours, session.dtype)
    if ours.soft_tokens is not None:
        yield from vision_rows(session)
        yield parity.vision_row(session.model, session.prompt, ours, session.dtype)
        yield parity.fusion_row(ours)


def vision_rows(session: Session) -> Iterator[Row]:
    """The vision stage sub-stage by sub-stage on the sample images (encoder layers merged)."""
    prompt, profile = session.prompt, session.runtime.layout.vision_profile
    ids, dtype = prompt.image_position_ids, session.dtype
    yield from parity_vision.vision_input_rows(session.model, ids, profile=profile, dtype=dtype)
    rows = parity_vision.vision_stage_rows(session.model, prompt.pixel_values, ids, profile=profile, dtype=dtype)
    layers = [row for row in rows if row.check.startswith("encoder layer")]
    yield rows[0]
    yield merge(layers, "vision prefill", f"encoder layers 0-{len(layers) - 1} hidden states")
    yield from rows[len(layers) + 1 :]


def rope_rows(session: Session) -> Iterator[Row]:
    """RoPE per layer type and dtype vs ``Gemma4TextRotaryEmbedding``, positions ``[0, 4100)``."""
    positions = torch.arange(tolerances.ROPE_POSITIONS)[None]
    for dtype in tolerances.ROPE:
        yield from parity.rope_rows(session.config, positions, dtype)


def layer_rows(session: Session) -> Iterator[Row]:
    """Every decoder layer's output (grouped), every producing layer's K/V and the prefill logits."""
    if session.dtype != torch.float32:
        yield from verify_numerics.layer_rows(session)
        return
    valid = session.prompt.attention_mask.bool()
    layers = parity.hidden_state_rows(session.model, session.ours, session.theirs, valid, session.dtype)[1:]
    for start in range(0, len(layers), LAYER_GROUP):
        group = layers[start : start + LAYER_GROUP]
        yield merge(group, "decoder layers", f"layers {start}-{start + len(group) - 1} hidden states")
    kv = parity.kv_rows(session.runtime, session.model, session.prompt, session.dtype)
    for kind in ("K", "V"):
        chosen = [row for row in kv if row.check.endswith(kind)]
        yield merge(chosen, "KV cache", f"{kind} of {len(chosen)} producing layers vs HF cache")
    hf_logits = session.theirs.logits[torch.arange(valid.shape[0]), session.prompt.last_index]
    yield from parity.logits_rows(session.ours.logits, hf_logits, session.dtype)


def decode_rows(session: Session) -> Iterator[Row]:
    """``steps`` decode steps per row vs HF's DynamicCache, then greedy generation vs HF generate."""
    prompt, runtime, steps = session.prompt, session.runtime, session.steps
    batch = prompt.input_ids.shape[0]
    vocab = runtime.spec.vocab_size
    tokens = torch.randint(3, min(vocab, 400), (batch, steps), generator=torch.Generator().manual_seed(1))
    if session.dtype != torch.float32:
        yield from verify_numerics.decode_rows(session, tokens)
        return
    with recorded_ranges(runtime, session.ranges):
        rows = parity.decode_rows(session.model, runtime, prompt, tokens, session.dtype)
        generated = parity.generation_rows(session.model, runtime, prompt, max_new_tokens=steps)
    logits = [row for row in rows if row.metric == "max abs diff"]
    yield merge(logits, "decode steps", f"{batch} rows x {steps} steps, logits")
    yield from generated


def chunked_prefill_rows(session: Session) -> Iterator[Row]:
    """A text prompt longer than two windows prefilled in chunks of ``W + 1`` over the ring caches,
    against HF: the logits and the K/V of every row and producing layer (low precision: against
    float64, :func:`.verify_numerics.chunked_prefill_rows`)."""
    window, chunk = session.window, session.window + 1
    prompt = text_prompt(session.config, [2 * window + 3, max(1, window - 1)], seed=3)
    max_seq = -(-(2 * window + 3) // chunk) * chunk
    runtime = StaticGemma4Runtime(
        session.model, max_seq=max_seq, batch_size=2, prefill_chunk=chunk, backend=session.backend
    )
    ours = runtime.prefill(prompt.input_ids, prompt.attention_mask)
    check = f"chunks of {chunk}"
    if session.dtype != torch.float32:
        yield from verify_numerics.chunked_prefill_rows(session, runtime, prompt, ours, check)
        return
    theirs = hf_prefill(session.model, prompt).logits[torch.arange(2), prompt.last_index]
    yield parity.stage_row("chunked prefill", f"{check}, logits of the last valid tokens", ours, theirs, session.dtype)
    kv = parity.kv_rows(runtime, session.model, prompt, session.dtype)
    yield merge(kv, "chunked prefill", f"{check}, K/V of every row vs HF cache")


def mask_value_rows(session: Session) -> Iterator[Row]:
    """The runtime's additive mask value against the score range its layers can produce."""
    yield from parity_numerics.mask_value_rows(session.runtime)


def overflow_rows(session: Session) -> Iterator[Row]:
    """The largest activation of every stage and layer over the prefill and decode, with headroom
    (PyTorch backend: the ExecuTorch programs' activations are not observable, see :mod:`.overflow`)."""
    if session.backend == "torch":
        yield from overflow.overflow_rows(session.ranges, session.dtype)


def export_rows(session: Session) -> Iterator[Row]:
    """Each stage exported with torch.export (one representative layer per type and K/V role, in
    prefill, chunk and decode mode) replays its eager output."""
    cases = stage_cases(
        session.runtime,
        pixel_values=session.prompt.pixel_values,
        image_position_ids=session.prompt.image_position_ids,
        representative=True,
    )
    yield merge(parity.export_rows(cases), "export round-trip", f"{len(cases)} stages, exported vs eager")


# Every check group by name, in data-flow order (``verify --without NAME`` leaves one out).
CHECKS: dict[str, Callable[[Session], Iterator[Row]]] = {
    "inputs": input_rows,
    "prefill-masks": prefill_mask_rows,
    "decode-masks": decode_mask_rows,
    "chunk-masks": chunk_mask_rows,
    "vision-masks": vision_mask_rows,
    "rope": rope_rows,
    "mask-value": mask_value_rows,
    "layers": layer_rows,
    "chunked-prefill": chunked_prefill_rows,
    "decode": decode_rows,
    "overflow": overflow_rows,
    "export": export_rows,
}


@torch.no_grad()
def run_verification(
    model: Any,
    *,
    dtype: torch.dtype = torch.float32,
    max_seq: int | None = None,
    steps: int | None = None,
    export: bool = True,
    backend: str = "torch",
    mask_value: float | None = None,
    checks: tuple[str, ...] = tuple(CHECKS),
    on_row: Callable[[Row], None] = lambda row: None,
) -> list[Row]:
    """Run the ``checks`` (names of :data:`CHECKS`; ``export`` only with ``export=True``) on ``model``
    (an HF Gemma 4 model) in the profile ``dtype`` with the runtime on ``backend`` (forbidden keys
    at ``mask_value``, default per dtype); ``on_row`` sees each row as it finishes."""
    unknown = sorted(set(checks) - set(CHECKS))
    if unknown:
        raise ValueError(f"checks has unknown names {unknown}; expected some of {list(CHECKS)}")
    session = open_session(model, dtype=dtype, max_seq=max_seq, steps=steps, backend=backend, mask_value=mask_value)
    rows = []
    for name, stage in CHECKS.items():
        if name not in checks or (name == "export" and not export):
            continue
        for row in stage(session):
            on_row(row)
            rows.append(row)
    return rows
