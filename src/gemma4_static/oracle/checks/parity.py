"""Each parity check of the static runtime against HF, written once, returning report rows.

``gemma4-static verify`` merges the rows into its report; the parametrized tests assert them with
:func:`~gemma4_static.oracle.results.report.assert_rows_pass`, which names the first row that failed. Rows
come in data-flow order (embeddings before layer 0, layer 0 before layer 1, K before V).
Tolerances come from :mod:`~gemma4_static.oracle.tolerances`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from ...export import StageCase, export_case
from ...ports import Gemma4Port
from ...runtime import PrefillOutputs
from ..numerics.parity_numerics import decision_rows, greedy_rows
from ..references.hf import (
    HFPrefill,
    hf_decode_logits,
    hf_greedy,
    hf_input_embeddings,
    hf_per_layer_inputs,
    hf_rope,
    paired_hidden_states,
)
from ..references.hf_cache import paired_kv
from ..references.hf_vision import hf_image_features
from ..references.samples import Prompt
from ..results import tolerances
from ..results.report import Row

PLACEHOLDER_FIELDS = ("image_token_id", "video_token_id", "audio_token_id")  # what HF maps to the pad id


def compare(stage: str, check: str, ours: torch.Tensor, theirs: torch.Tensor, tolerance: float) -> Row:
    """Max abs diff of ``ours`` vs ``theirs`` (``inf`` when the shapes or dtypes differ)."""
    if ours.shape != theirs.shape or ours.dtype != theirs.dtype:
        mismatch = f"{check} ({tuple(ours.shape)} {ours.dtype} vs {tuple(theirs.shape)} {theirs.dtype})"
        return Row(stage, mismatch, "max abs diff", float("inf"), tolerance)
    error = float((ours.float() - theirs.float()).abs().max()) if ours.numel() else 0.0
    return Row(stage, check, "max abs diff", error, tolerance)


def stage_row(stage: str, check: str, ours: torch.Tensor, theirs: torch.Tensor, dtype: torch.dtype) -> Row:
    """A stage output against HF within the dtype's relative tolerance."""
    return compare(stage, check, ours, theirs, tolerances.relative(dtype, theirs))


def count_row(stage: str, check: str, metric: str, differing: int) -> Row:  # exact: tolerance 0
    return Row(stage, check, metric, differing, tolerances.EXACT)


def static_input_row(prompt: Prompt, ids: torch.Tensor, valid: torch.Tensor, config: Any) -> Row:
    """A port's static inputs ``ids, valid (B, N)`` vs what HF's language model sees for ``prompt``:
    every placeholder (image, video, audio) as the pad id, padded with the pad id to ``N``, valid on
    the prompt's tokens only (counted entry by entry; ``N`` below the prompt's length mismatches all)."""
    expected = llm_input_ids(prompt, config)
    batch, length = expected.shape
    if ids.shape[0] != batch or ids.shape[1] < length or valid.shape != ids.shape:
        return count_row("static inputs", "ids, valid mask", "mismatched entries", max(ids.numel(), expected.numel()))
    pad = config.get_text_config().pad_token_id
    padded = torch.full_like(ids, pad)
    padded[:, :length] = expected
    valid_expected = torch.zeros_like(valid, dtype=torch.bool)
    valid_expected[:, :length] = prompt.attention_mask.bool()
    mismatches = int((ids != padded).sum()) + int((valid.bool() != valid_expected).sum())
    return count_row("static inputs", "ids (placeholders as pad), valid mask", "mismatched entries", mismatches)


def embedding_row(model: Any, port: Gemma4Port, ids: torch.Tensor) -> Row:
    """The port's token embedding vs ``get_input_embeddings``: exact (the same lookup and scale)."""
    theirs = hf_input_embeddings(model, ids)
    return compare("token embedding", "vs get_input_embeddings", port.token_embedding(ids), theirs, tolerances.EXACT)


def llm_input_ids(prompt: Prompt, config: Any) -> torch.Tensor:
    """The ids HF's language model sees for ``prompt`` (a model's ``config``): every image, video and
    audio placeholder becomes the pad id (``get_placeholder_mask``)."""
    ids = prompt.input_ids.clone()
    for field in PLACEHOLDER_FIELDS:
        placeholder = getattr(config, field, None)
        if placeholder is not None:
            ids[ids == placeholder] = config.get_text_config().pad_token_id
    return ids


def ple_row(
    model: Any, ids: torch.Tensor, hf_output: HFPrefill, per_layer_inputs: torch.Tensor, dtype: torch.dtype
) -> Row:
    """Per-layer inputs ``(B, S, L, P)`` vs HF's ``project_per_layer_inputs`` on its own fused
    embeddings (``hf_output``'s first hidden state) and the language-model ids ``(B, S)``: a question
    to HF that does not depend on the port (a recorded reference answers it for any port)."""
    theirs = hf_per_layer_inputs(model, hf_output.hidden_states[0], ids)
    ours = per_layer_inputs[:, : ids.shape[1]]
    return stage_row("PLE", "vs project_per_layer_inputs", ours, theirs, dtype)


def vision_row(model: Any, prompt: Prompt, soft_tokens: tuple[torch.Tensor, ...], dtype: torch.dtype) -> Row:
    """The soft tokens a prefill put into the image slots (one ``(T_i, H)`` per image) vs ``get_image_features``."""
    pooled = hf_image_features(model, prompt.pixel_values, prompt.image_position_ids)
    check = "soft tokens in prefill vs get_image_features"
    return stage_row("vision prefill", check, torch.cat(soft_tokens), torch.cat(pooled), dtype)


def fusion_row(outputs: PrefillOutputs) -> Row:
    """Fixed-slot fusion vs ``masked_scatter``: exact (the same values moved)."""
    embeds, soft = outputs.embeddings, outputs.soft_tokens
    is_image = outputs.inputs.mm_token_type_ids.bool()[..., None].expand_as(embeds)
    theirs = embeds.masked_scatter(is_image, torch.cat(soft))
    return compare("fusion", "vs masked_scatter", outputs.hidden_states[0], theirs, tolerances.EXACT)


def rope_rows(config: Any, rope: Any, position_ids: torch.Tensor, dtype: torch.dtype) -> list[Row]:
    """cos/sin per layer type from ``rope(position_ids, dtype)`` (a port's, e.g. ``port.rope``) vs
    ``Gemma4TextRotaryEmbedding`` (``inf`` on a dtype or shape mismatch)."""
    theirs = hf_rope(config, position_ids, dtype=dtype)
    return rope_pairs_rows("RoPE", str(dtype).removeprefix("torch."), rope(position_ids, dtype), theirs, dtype)


def rope_pairs_rows(stage: str, note: str, ours: dict, theirs: dict, dtype: torch.dtype) -> list[Row]:
    """``{layer_type: (cos, sin)}`` tables against HF's, one row per layer type (the worse of cos and
    sin; ``inf`` for a missing type or a dtype or shape mismatch)."""
    rows = []
    for name in sorted(ours.keys() | theirs.keys()):
        check = f"{name} {note}"
        mine, reference = ours.get(name), theirs.get(name)
        if mine is None or reference is None or any(a.dtype != dtype for a in (*mine, *reference)):
            rows.append(Row(stage, check, "max abs diff", float("inf"), tolerances.ROPE[dtype]))
            continue
        cos, sin = (compare(stage, check, a, b, tolerances.ROPE[dtype]) for a, b in zip(mine, reference, strict=True))
        rows.append(max(cos, sin, key=lambda row: row.value))
    return rows


def hidden_state_rows(
    states: tuple[torch.Tensor, ...], hf_output: HFPrefill, valid: torch.Tensor, dtype: torch.dtype
) -> list[Row]:
    """The embeddings and each layer's output ``states`` on the valid positions, in layer order (the
    last before the final norm on both sides)."""
    pairs = paired_hidden_states(states, hf_output, valid)
    return [
        stage_row("decoder layers", "embeddings" if index == 0 else f"layer {index - 1}", mine, theirs, dtype)
        for index, (mine, theirs) in enumerate(pairs)
    ]


def kv_rows(
    port: Gemma4Port, model: Any, prompt: Prompt, dtype: torch.dtype, tokens: torch.Tensor | None = None
) -> list[Row]:
    """K and V of every layer the port's cache reports (every producing layer at least) and every row
    after its prefill of ``prompt`` (and decode steps ``tokens (B, T)``) vs HF's cache of each row (on
    the positions HF keeps, see ``paired_kv``)."""
    return [
        stage_row("KV cache", name, mine, theirs, dtype)
        for name, mine, theirs in paired_kv(port.cache_kv, model, prompt, tokens)
    ]


def cache_rows(stage: str, ours: Any, reference: Any) -> list[Row]:
    """Two static caches of one layout (e.g. chunked vs single-shot prefill), K and V of every
    producing layer on every slot that holds a position."""
    rows = []
    for layer in reference.keys:
        held = reference.key_positions(reference.layer_types[layer], reference.lengths) >= 0
        for kind, mine, theirs in (("K", ours.keys, reference.keys), ("V", ours.values, reference.values)):
            pair = mine[layer].transpose(1, 2)[held], theirs[layer].transpose(1, 2)[held]
            rows.append(stage_row(stage, f"layer {layer} {kind}", *pair, torch.float32))
    return rows


def logits_rows(ours: torch.Tensor, theirs: torch.Tensor, dtype: torch.dtype) -> list[Row]:
    """Last-token logits ``(B, vocab)`` and the argmax of every row whose top-2 gap is decided (the
    token rule, :mod:`..numerics.metrics`; tied rows reported)."""
    return [
        stage_row("prefill logits", "last valid token per row", ours, theirs, dtype),
        *_argmax_rows("prefill logits", "argmax of each row", ours, theirs, lambda row: f"row {row}"),
    ]


def _argmax_rows(stage: str, check: str, ours: torch.Tensor, theirs: torch.Tensor, names: Any) -> list[Row]:
    bound = tolerances.token_bound(theirs)
    return decision_rows(stage, check, ours, theirs, bound, f"2 x the logits tolerance ({bound:.3g})", names)


def port_decode(port: Gemma4Port, tokens: torch.Tensor) -> torch.Tensor:
    """Logits ``(B, T, vocab)`` of feeding ``tokens (B, T)`` through ``port.decode`` step by step."""
    return torch.stack([port.decode(tokens[:, t : t + 1]) for t in range(tokens.shape[1])], dim=1)


def decode_rows(model: Any, port: Gemma4Port, prompt: Prompt, tokens: torch.Tensor, dtype: torch.dtype) -> list[Row]:
    """Feed ``tokens (B, T)`` through ``port.decode`` (after its prefill of ``prompt``) and through
    HF's ``DynamicCache`` row by row; per row the logits and the argmax of each decided step."""
    ours, reference = port_decode(port, tokens), hf_decode_logits(model, prompt, tokens)
    rows = []
    for row, (mine, theirs) in enumerate(zip(ours, reference, strict=True)):
        logits = stage_row("decode steps", f"row {row} logits", mine, theirs, dtype)
        if logits.failed and mine.shape == theirs.shape:  # name the first step beyond tolerance
            step = int(((mine - theirs).abs().amax(dim=-1) > logits.tolerance).float().argmax())
            logits = dataclasses.replace(logits, check=f"{logits.check} [first: step {step}]")
        rows += [logits, *_argmax_rows("decode steps", f"row {row} argmax", mine, theirs, lambda step: f"step {step}")]
    return rows


def generation_rows(
    model: Any, port: Gemma4Port, prompt: Prompt, *, max_new_tokens: int, eos_token_id: int | None = None
) -> list[Row]:
    """Greedy ``port.generate`` vs HF ``generate`` (batch-1 calls): no row may leave HF's tokens at
    a step whose top-2 gap is decided (the token rule; tied divergences reported)."""
    ours = port.generate(prompt, max_new_tokens=max_new_tokens, eos_token_id=eos_token_id)
    theirs, logits = hf_greedy(model, prompt, max_new_tokens=max_new_tokens, eos_token_id=eos_token_id)
    check = f"{ours.shape[0]} rows x {max_new_tokens} tokens vs HF generate"
    return greedy_rows("generation", check, ours, theirs, logits, tolerances.token_bound(logits))


def export_rows(cases: list[StageCase]) -> list[Row]:
    """Each stage case exported with ``torch.export`` (its nodes without source stack traces: only
    replayed) replays its eager output, output by output."""
    return [row for case in cases for row in replay_rows(case, export_case(case, stack_traces=False))]


def replay_rows(case: StageCase, program: torch.export.ExportedProgram) -> list[Row]:
    """``program`` (``case`` exported, or saved and loaded again) replays the eager output of
    ``case``, output by output, on the same inputs (the eager outputs kept first: a stage that writes
    into its inputs, so is not a function of them, leaves the program other inputs and fails)."""
    eager = [output.clone() for output in _flatten(case.module(*case.args, **case.kwargs))]  # not views of inputs
    exported = _flatten(program.module()(*case.args, **case.kwargs))
    rows = []
    for index, (mine, reference) in enumerate(zip(exported, eager, strict=True)):
        tolerance = tolerances.scaled(tolerances.EXPORT_RELATIVE, reference)
        rows.append(compare("export round-trip", f"{case.name} output {index}", mine, reference, tolerance))
    return rows


def _flatten(value: Any) -> list[torch.Tensor]:
    return [item for part in value for item in _flatten(part)] if isinstance(value, tuple | list) else [value]
