"""The ``inputs`` check group: the port's static inputs, token embedding, PLE, the vision stage and
fusion against what HF computes (in a low-precision profile against HF in float64, HF's own figures
in the profile beside)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import torch

from ...ports.capabilities.host_stages import STATIC_INPUTS, TOKEN_EMBEDDING
from ..checks import parity, parity_vision
from ..numerics import parity_numerics
from ..references.hf import hf_input_embeddings, hf_per_layer_inputs
from ..references.hf_vision import hf_image_features
from ..references.samples import Prompt
from ..results.report import Row, merge, skip_row
from ..session.port_calls import guarded
from ..session.session import Session
from . import CheckGroup


def input_rows(session: Session) -> Iterator[Row]:
    """Static inputs, token embedding, PLE, vision prefill and fusion vs what HF computes."""
    return low_precision_rows(session) if session.low_precision else float32_rows(session)


def float32_rows(session: Session) -> Iterator[Row]:
    """In float32: each stage against HF float32's."""
    prompt, model, dtype = session.prompt, session.model, session.dtype
    ids = parity.llm_input_ids(prompt, model.config)
    yield from static_input_rows(session)
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


def static_input_rows(session: Session) -> Iterator[Row]:
    """The port's static inputs vs what HF's language model sees: for the sample prompt (as the port
    takes it), and for the same prompt with the video and audio placeholders in place of each row's
    last two text tokens (:func:`with_placeholders`; the image placeholder marks images, no text)."""

    def judged(what: str, prompt: Prompt) -> Row:
        compared = parity.static_input_row(prompt, *session.port.static_inputs(prompt), session.config)
        return dataclasses.replace(compared, check=f"{what}: {compared.check}")

    yield from guarded("static inputs", "sample prompt", lambda: [judged("sample prompt", session.port_prompt)])
    placed = with_placeholders(session.prompt, session.config).padded(session.under_test.limits.batch.padding_side)
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


def low_precision_rows(session: Session) -> Iterator[Row]:
    """Static inputs and token embedding exactly as HF's same-profile ones (:func:`_embedding_rows`);
    the embedding, PLE and the soft tokens against float64 (each a SKIP row where the port does not expose it)."""
    prompt = session.prompt
    yield from static_input_rows(session)
    ids = parity.llm_input_ids(prompt, session.config)
    yield from guarded("token embedding", "vs float64", lambda: _embedding_rows(session, ids))
    if session.has_per_layer_inputs:
        yield from guarded("PLE", "vs float64", lambda: _ple_rows(session, ids))
    if prompt.pixel_values is not None:
        yield from guarded("vision prefill", "soft tokens", lambda: _soft_token_rows(session))
        yield from guarded("fusion", "vs masked_scatter", lambda: [parity.fusion_row(session.runtime_outputs)])


def _embedding_rows(session: Session, ids: torch.Tensor) -> Iterator[Row]:
    """Exactly HF's same-profile lookup (a cast, a scheme's weight-only table, this runtime's
    scheme), except in another port's static recipe, whose calibrated rounding of the lookup is its
    own; against float64 under the gate always."""
    if session.is_runtime or session.scheme is None or session.scheme.dynamic:
        yield parity.embedding_row(session.hf_model, session.port, ids)
    valid = session.prompt.attention_mask.bool()
    embedded = [hf_input_embeddings(model, ids)[valid] for model in (session.hf_model, session.reference_model)]
    mine = session.port.token_embedding(ids)[valid]
    yield from parity_numerics.metric_rows("token embedding", "vs float64", mine, *embedded, session.gate)


def _ple_rows(session: Session, ids: torch.Tensor) -> list[Row]:
    valid = session.prompt.attention_mask.bool()
    mine = session.exposed(session.ours.per_layer_inputs, "per-layer inputs")[:, : valid.shape[1]][valid]
    hf = hf_per_layer_inputs(session.hf_model, session.theirs.hidden_states[0], ids)[valid]
    reference = hf_per_layer_inputs(session.reference_model, session.reference.hidden_states[0], ids)[valid]
    return parity_numerics.metric_rows("PLE", "vs float64", mine, hf, reference, session.gate)


def _soft_token_rows(session: Session) -> list[Row]:
    prompt, mine = session.prompt, torch.cat(session.exposed(session.ours.soft_tokens, "soft tokens"))
    soft = {
        name: torch.cat(hf_image_features(model, pixels, prompt.image_position_ids))
        for name, model, pixels in (
            ("hf", session.hf_model, prompt.pixel_values.to(session.dtype)),
            ("ref", session.reference_model, prompt.pixel_values.double()),
        )
    }
    return parity_numerics.metric_rows("vision prefill", "soft tokens", mine, soft["hf"], soft["ref"], session.gate)


GROUP = CheckGroup(
    name="inputs",
    order=20,
    describe="static inputs, token embedding, PLE, the vision stage and fusion against what HF computes",
    rows=input_rows,
    reads=(STATIC_INPUTS, TOKEN_EMBEDDING),
)
