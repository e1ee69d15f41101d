"""The ``inputs`` check group of :mod:`.verify`: static inputs, token embedding, PLE, the vision
stage and fusion against what HF computes (low precision: :mod:`.verify_numerics`)."""

from __future__ import annotations

from collections.abc import Iterator

from ..checks import parity, parity_vision
from ..checks.report import Row, merge, skip_row
from . import verify_host, verify_numerics
from .port_calls import guarded
from .session import Session


def input_rows(session: Session) -> Iterator[Row]:
    """Static inputs, token embedding, PLE, vision prefill and fusion vs what HF computes."""
    if session.low_precision:
        yield from verify_numerics.input_rows(session)
        return
    prompt, model, dtype = session.prompt, session.model, session.dtype
    ids = parity.llm_input_ids(prompt, model.config)
    yield from verify_host.static_input_rows(session)
    yield from guarded(
        "token embedding", "vs get_input_embeddings", lambda: [parity.embedding_row(model, session.port, ids)]
    )
    if not session.has_per_layer_inputs:
        yield skip_row("PLE", "vs project_per_layer_inputs", "the model has no per-layer embeddings")
    else:
        yield from guarded(
            "PLE",
            "vs project_per_layer_inputs",
            lambda: [
                parity.ple_row(
                    model,
                    ids,
                    session.theirs,
                    session.exposed(session.ours.per_layer_inputs, "per-layer inputs"),
                    dtype,
                )
            ],
        )
    if prompt.pixel_values is None:
        return
    yield from guarded("vision prefill", "sub-stages of this runtime's vision stage", lambda: vision_rows(session))
    yield from guarded(
        "vision prefill",
        "soft tokens",
        lambda: [parity.vision_row(model, prompt, session.exposed(session.ours.soft_tokens, "soft tokens"), dtype)],
    )
    yield from guarded("fusion", "vs masked_scatter", lambda: [parity.fusion_row(session.runtime_outputs)])


def vision_rows(session: Session) -> Iterator[Row]:
    """This runtime's vision stage sub-stage by sub-stage on the sample images (encoder layers merged)."""
    prompt, (profile, *_) = session.prompt, session.runtime.layout.vision_profiles
    ids, dtype = prompt.image_position_ids, session.dtype
    yield from parity_vision.vision_input_rows(session.model, ids, profile=profile, dtype=dtype)
    rows = parity_vision.vision_stage_rows(session.model, prompt.pixel_values, ids, profile=profile, dtype=dtype)
    layers = [row for row in rows if row.check.startswith("encoder layer")]
    yield rows[0]
    yield merge(layers, "vision prefill", f"encoder layers 0-{len(layers) - 1} hidden states")
    yield from rows[len(layers) + 1 :]
