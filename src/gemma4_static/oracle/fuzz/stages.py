"""Every stage output a port's prefill returns, judged in the fuzzer as ``verify`` judges it: each
layer's hidden states (the embeddings first), the per-layer inputs and the soft tokens, row by row
against HF's forward over that row's prompt alone (batch 1, no padding).

Float32 (``gate`` ``None``): the float32 tolerance of HF's values; a profile or an integer scheme: the
stage's SQNR gate against HF in float64 (the fuzzer's model there)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

from ...ports import PortPrefill
from ...ports.prompt import Prompt
from ..checks.parity import llm_input_ids, stage_row
from ..numerics.metrics import measure
from ..references.hf import hf_per_layer_inputs, hf_prefill, paired_hidden_states
from ..references.hf_vision import hf_image_features
from ..results.report import Row

STAGE_FIELDS = ("hidden_states", "per_layer_inputs", "soft_tokens")  # judged here; the logits by the episode


def stage_pairs(model: Any, result: PortPrefill, given: Prompt, prompt: Prompt) -> Iterator[tuple[str, str, Any, Any]]:
    """``(stage, check, ours, HF's)`` for each stage output ``result`` holds: the prefill of ``given``
    (``prompt`` in the port's padding), each row against HF's forward over that row of ``prompt``."""
    if result.hidden_states is None and result.per_layer_inputs is None and result.soft_tokens is None:
        return
    for row in range(prompt.input_ids.shape[0]):
        history = prompt.row(row)
        valid = history.attention_mask.bool()
        theirs = hf_prefill(model, history)
        if result.hidden_states is not None:
            states = tuple(given.right_aligned(state)[row : row + 1] for state in result.hidden_states)
            pairs = paired_hidden_states(states, theirs, valid) if len(states) == len(theirs.layer_outputs) else []
            if not pairs:
                yield "decoder layers", f"row {row}: {len(states)} hidden states", None, len(theirs.layer_outputs)
            for index, (mine, reference) in enumerate(pairs):
                name = "embeddings" if index == 0 else f"layer {index - 1}"
                yield "decoder layers", f"row {row} {name}", mine, reference
        if result.per_layer_inputs is not None:
            ids = llm_input_ids(history, model.config)
            mine = given.right_aligned(result.per_layer_inputs)[row : row + 1, : ids.shape[1]]
            yield "PLE", f"row {row}", mine, hf_per_layer_inputs(model, theirs.hidden_states[0], ids)
    if result.soft_tokens is not None and given.pixel_values is not None:
        reference = hf_image_features(model, given.pixel_values.to(model.dtype), given.image_position_ids)
        yield "vision prefill", "soft tokens", torch.cat(result.soft_tokens), torch.cat(reference)


@torch.no_grad()
def stage_rows(model: Any, gate: Any, result: PortPrefill, given: Prompt, prompt: Prompt) -> list[Row]:
    """A row per stage output ``result`` holds (:func:`stage_pairs`): within the float32 tolerance
    (``gate`` ``None``) or the stage's SQNR gate against float64."""
    rows = []
    for stage, check, mine, theirs in stage_pairs(model, result, given, prompt):
        if mine is None:  # a count that does not match HF's: nothing pairs up
            rows.append(Row(stage, f"{check} where HF has {theirs}", "max abs diff", float("inf"), 0.0))
        elif gate is None:
            rows.append(stage_row(stage, check, mine, theirs, torch.float32))
        else:
            sqnr = measure(mine, theirs).sqnr_db if mine.shape == theirs.shape else float("-inf")
            rows.append(Row(stage, check, "SQNR dB", sqnr, gate.sqnr_gate(stage), higher_is_better=True))
    return rows
