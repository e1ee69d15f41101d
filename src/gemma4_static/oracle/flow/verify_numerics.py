"""The check groups of a low-precision verification (``verify --dtype bfloat16|float16`` or
``--quant SCHEME``): every stage output against HF in float64, with HF's own metrics in the same
profile beside ours, gated per profile (:mod:`..numerics.gates`). Masks and RoPE are checked as in
float32 (:mod:`.verify`)."""

from __future__ import annotations

from collections.abc import Iterator
from operator import attrgetter
from typing import Any

import torch

from ...ports.base import NotExposed
from ..checks import parity
from ..checks.figures import layer_points
from ..checks.report import Row, merge_by, skip_row
from ..numerics import parity_numerics
from ..references.hf import (
    hf_decode_logits,
    hf_generate,
    hf_greedy,
    hf_input_embeddings,
    hf_per_layer_inputs,
    hf_prefill,
    paired_hidden_states,
)
from ..references.hf_cache import paired_kv
from ..references.hf_vision import hf_image_features
from ..references.samples import Prompt
from . import verify_host
from .port_calls import PLAIN, guarded, plain_prefill_logits
from .session import LAYER_GROUP, Session


def input_rows(session: Session) -> Iterator[Row]:
    """Static inputs and token embedding exactly as HF's same-profile ones (:func:`_embedding_rows`);
    the embedding, PLE and the soft tokens against float64 (each a SKIP row where the port does not expose it)."""
    prompt = session.prompt
    yield from verify_host.static_input_rows(session)
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


def layer_rows(session: Session) -> Iterator[Row]:
    """Each layer's hidden states (grouped), the K/V of every producing layer, the prefill logits."""
    gate, valid, prompt = session.gate, session.prompt.attention_mask.bool(), session.prompt
    yield from guarded("decoder layers", "hidden states vs float64", lambda: _hidden_state_rows(session))
    yield from _kv_rows(session, "KV cache", session.port, prompt, "")
    rows_index = torch.arange(valid.shape[0])
    reference = session.reference.logits[rows_index, prompt.last_index]
    hf = session.theirs.logits[rows_index, prompt.last_index]
    check = "last valid token per row"
    yield from parity_numerics.metric_rows("prefill logits", check, session.ours.logits, hf, reference, gate)
    yield from guarded(
        "prefill logits",
        PLAIN,
        lambda: parity_numerics.metric_rows(
            "prefill logits", PLAIN, plain_prefill_logits(session.port, session.port_prompt), hf, reference, gate
        ),
    )
    yield parity_numerics.sample_gap_row("prefill logits", reference, gate)
    positions = valid.nonzero().tolist()
    every = f"every valid position ({len(positions)})"
    yield from guarded(
        "prefill logits",
        every,
        lambda: parity_numerics.token_rows(
            "prefill logits",
            every,
            session.exposed(session.ours.all_logits, "the logits of every position")[valid],
            session.theirs.logits[valid],
            session.reference.logits[valid],
            gate,
            lambda index: "row {} position {}".format(*positions[index]),
        ),
    )


def _hidden_state_rows(session: Session) -> Iterator[Row]:
    """Each layer's hidden states against float64, merged per group of :data:`LAYER_GROUP` layers."""
    gate, valid = session.gate, session.prompt.attention_mask.bool()
    states = session.exposed(session.ours.hidden_states, "hidden states")
    ours = paired_hidden_states(states, session.reference, valid)
    layers = [
        parity_numerics.metric_rows("decoder layers", f"layer {index}", mine, hf[valid], reference, gate)
        for index, ((mine, reference), hf) in enumerate(zip(ours[1:], session.theirs.layer_outputs[1:], strict=True))
    ]
    session.figures["layers"] = layer_points(layers)
    for start in range(0, len(layers), LAYER_GROUP):
        group = [row for rows in layers[start : start + LAYER_GROUP] for row in rows]
        yield from merge_by(group, attrgetter("metric"), f"layers {start}-{start + LAYER_GROUP - 1} hidden states")


def _kv_rows(session: Session, stage: str, port: Any, prompt: Prompt, prefix: str) -> Iterator[Row]:
    """K and V of every producing layer and row of ``port``'s cache after prefilling ``prompt``,
    against HF's caches (float64 and same dtype), merged per kind and metric (this runtime's cache;
    a SKIP row for another port's)."""
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


def chunked_prefill_rows(session: Session, port: Any, prompt: Prompt, ours: torch.Tensor, check: str) -> Iterator[Row]:
    """A chunked prefill's last-token logits ``ours (B, vocab)`` and its cache against float64 (HF's
    same-dtype figures beside), the logits under the token rule too."""
    gate, rows = session.gate, torch.arange(prompt.input_ids.shape[0])
    models = (session.reference_model, session.hf_model)
    reference, hf = (hf_prefill(model, prompt).logits[rows, prompt.last_index] for model in models)
    stage = "chunked prefill"
    yield from parity_numerics.metric_rows(stage, f"{check}, last valid token per row", ours, hf, reference, gate)
    bound, text = gate.token_bound(reference), gate.bound_text
    yield from parity_numerics.decision_rows(
        stage, check, ours, reference, bound, text, lambda row: f"row {row}", hf=hf
    )
    yield from _kv_rows(session, stage, port, prompt, f"{check}, ")


def decode_rows(session: Session, tokens: torch.Tensor) -> Iterator[Row]:
    """Decode ``tokens (B, T)`` after the prefill, then greedy generation; against float64."""
    prompt, gate = session.prompt, session.gate
    batch, steps = tokens.shape
    with session.recording():
        session.ours  # noqa: B018 (the decode continues the sample prompt's prefill: its error again if it raised)
        ours = parity.port_decode(session.port, tokens)
    models = (("hf", session.hf_model), ("ref", session.reference_model))
    decoded = {name: hf_decode_logits(model, prompt, tokens) for name, model in models}
    flat = [logits.flatten(0, 1) for logits in (ours, decoded["hf"], decoded["ref"])]
    check = f"{batch} rows x {steps} steps"
    yield from parity_numerics.metric_rows("decode steps", check, *flat, gate)
    yield from parity_numerics.token_rows(
        "decode steps", check, *flat, gate, lambda index: f"row {index // steps} step {index % steps}"
    )
    with session.recording():
        generated = session.port.generate(session.port_prompt, max_new_tokens=steps)
    hf_tokens = hf_generate(session.hf_model, prompt, max_new_tokens=steps, eos_token_id=None)
    tokens, logits = hf_greedy(session.reference_model, prompt, max_new_tokens=steps, eos_token_id=None)
    bound = gate.token_bound(logits.flatten(0, 1)).view(tokens.shape)
    check = f"{batch} rows x {steps} greedy tokens vs float64 generate"
    yield from parity_numerics.greedy_rows("generation", check, generated, tokens, logits, bound, hf=hf_tokens)
