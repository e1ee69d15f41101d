"""The check groups of a low-precision verification (``verify --dtype bfloat16|float16``): every
stage output against HF in float64, with HF's own same-dtype metrics beside ours, gated per profile
(:mod:`.gates`). Masks and RoPE are checked as in float32 (:mod:`.verify`)."""

from __future__ import annotations

from collections.abc import Iterator
from operator import attrgetter

import torch

from ..spec import text_module
from . import parity, parity_numerics
from .gates import GATES
from .hf import hf_decode_logits, hf_generate, paired_hidden_states, paired_kv
from .overflow import recorded_ranges
from .report import Row, merge_by
from .session import LAYER_GROUP, Session


def input_rows(session: Session) -> Iterator[Row]:
    """Static inputs and token embedding exactly as HF's same-dtype ones; the embedding, PLE and the
    soft tokens against float64."""
    ours, gate, reference_model = session.ours, GATES[session.dtype], session.reference_model
    yield parity.static_input_row(session.prompt, ours, session.runtime.spec)
    yield parity.embedding_row(session.model, session.runtime, ours.inputs.input_ids)
    valid = session.prompt.attention_mask.bool()
    ids = ours.inputs.input_ids[:, : valid.shape[1]]
    embedded = [model.get_input_embeddings()(ids)[valid] for model in (session.model, reference_model)]
    mine = session.runtime.stages.embedding(ids)[valid]
    yield from parity_numerics.metric_rows("token embedding", "vs float64", mine, *embedded, gate)
    ple = {}
    for name, model, output in (("hf", session.model, session.theirs), ("ref", reference_model, session.reference)):
        text = text_module(model)
        ple[name] = text.project_per_layer_inputs(output.hidden_states[0], text.get_per_layer_inputs(ids, None))[valid]
    mine = ours.per_layer_inputs[:, : valid.shape[1]][valid]
    yield from parity_numerics.metric_rows("PLE", "vs float64", mine, ple["hf"], ple["ref"], gate)
    if ours.soft_tokens is not None:
        prompt = session.prompt
        soft = {
            name: torch.stack(model.model.get_image_features(pixels, prompt.image_position_ids).pooler_output)
            for name, model, pixels in (
                ("hf", session.model, prompt.pixel_values.to(session.dtype)),
                ("ref", reference_model, prompt.pixel_values.double()),
            )
        }
        rows = parity_numerics.metric_rows(
            "vision prefill", "soft tokens", ours.soft_tokens, soft["hf"], soft["ref"], gate
        )
        yield from rows
        yield parity.fusion_row(ours)


def layer_rows(session: Session) -> Iterator[Row]:
    """Each layer's hidden states (grouped), the K/V of every producing layer, the prefill logits."""
    gate, valid = GATES[session.dtype], session.prompt.attention_mask.bool()
    ours = paired_hidden_states(session.model, session.ours.hidden_states, session.reference.hidden_states, valid)
    layers = [
        parity_numerics.metric_rows("decoder layers", f"layer {index}", mine, hf[valid], reference, gate)
        for index, ((mine, reference), hf) in enumerate(zip(ours[1:], session.theirs.hidden_states[1:], strict=True))
    ]
    for start in range(0, len(layers), LAYER_GROUP):
        group = [row for rows in layers[start : start + LAYER_GROUP] for row in rows]
        yield from merge_by(group, attrgetter("metric"), f"layers {start}-{start + LAYER_GROUP - 1} hidden states")
    runtime, prompt = session.runtime, session.prompt
    kv_ref = paired_kv(runtime.cache, session.reference_model, prompt)
    kv_hf = paired_kv(runtime.cache, session.model, prompt)
    for kind in ("K", "V"):
        rows = [
            row
            for (name, mine, reference), (_, _, hf) in zip(kv_ref, kv_hf, strict=True)
            if name.endswith(kind)
            for row in parity_numerics.metric_rows("KV cache", name, mine, hf, reference, gate)
        ]
        yield from merge_by(rows, attrgetter("metric"), f"{kind} of every producing layer and row")
    rows_index = torch.arange(valid.shape[0])
    reference = session.reference.logits[rows_index, prompt.last_index]
    hf = session.theirs.logits[rows_index, prompt.last_index]
    yield from parity_numerics.metric_rows(
        "prefill logits", "last valid token per row", session.ours.logits, hf, reference, gate, logits="prefill"
    )


def decode_rows(session: Session, tokens: torch.Tensor) -> Iterator[Row]:
    """Decode ``tokens (B, T)`` after the prefill, then greedy generation; against float64."""
    runtime, prompt, gate = session.runtime, session.prompt, GATES[session.dtype]
    batch, steps = tokens.shape
    with recorded_ranges(runtime, session.ranges):
        ours = parity.runtime_decode(runtime, tokens)
    models = (("hf", session.model), ("ref", session.reference_model))
    decoded = {name: hf_decode_logits(model, prompt, tokens) for name, model in models}
    flat = [logits.flatten(0, 1) for logits in (ours, decoded["hf"], decoded["ref"])]
    yield from parity_numerics.metric_rows(
        "decode steps", f"{batch} rows x {steps} steps", *flat, gate, logits="decode"
    )
    with recorded_ranges(runtime, session.ranges):
        generated = parity.runtime_generate(runtime, prompt, max_new_tokens=steps)
    greedy = {name: hf_generate(model, prompt, max_new_tokens=steps, eos_token_id=None) for name, model in models}
    check = f"{batch} rows x {steps} greedy tokens vs float64 generate"
    yield parity_numerics.prefix_row("generation", check, generated, greedy["hf"], greedy["ref"], gate)
