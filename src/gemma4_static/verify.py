"""The side-by-side verification flow: each stage of the static runtime against HF, one report row
per check, with the metric, the tolerance and PASS/FAIL."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from .config import read_text_config
from .export import export_case, stage_cases
from .layouts import LENGTHS, PADDINGS, sequence_length, valid_mask
from .masks import build_decode_bool_masks, build_prefill_bool_masks
from .reference import (
    ATTN_IMPLEMENTATIONS,
    hf_decode_logits,
    hf_decode_visible_positions,
    hf_generate,
    hf_prefill,
    hf_prefill_bool_masks,
    hf_rope,
    paired_hidden_states,
    paired_kv,
)
from .rope import build_rope
from .runtime import PrefillOutputs, StaticGemma4Runtime
from .samples import Prompt, image_prompt, text_prompt

# RoPE tolerances. Both sides compute the same fp32 products position * inv_freq and the same
# cos/sin kernels, so fp32 agrees to the last bit in practice; the bound leaves two fp32 ulps at 1.0
# for a libm that rounds differently. bf16 casts those fp32 values once: a one-ulp fp32 difference
# at a rounding boundary flips at most one bf16 ulp, 2**-8 for values in [0.5, 1).
ROPE_TOLERANCE = {torch.float32: 2.5e-7, torch.bfloat16: 2.0**-8}
ROPE_POSITIONS = 4100  # past 4096, as long E2B contexts are used in practice


@dataclass(frozen=True)
class Row:
    """One report line: ``value`` is compared against ``tolerance`` (``value <= tolerance`` passes)."""

    stage: str
    check: str
    metric: str
    value: float
    tolerance: float

    @property
    def passed(self) -> bool:
        return self.value <= self.tolerance

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "status": "PASS" if self.passed else "FAIL"}


# Relative tolerance of a stage output vs HF, as a fraction of max(1, max|HF|). fp32: each stage
# repeats HF's op sequence and only summation orders differ (BLAS blocking on padded shapes, SDPA
# kernels), a few ulps per layer: ~2e-6 observed through 35 layers, 2e-5 allowed. bf16 (eps 2**-8)
# accumulates the same few roundings per layer at 2**-8 each: ~1e-2 observed, 5e-2 allowed.
RELATIVE_TOLERANCE = {torch.float32: 2e-5, torch.bfloat16: 5e-2}
LAYER_GROUP = 5  # report decoder layers in groups of one 4:1 period


@dataclass
class Session:
    """Everything the stage checks share: the model, the sample prompt, the runtime, and the
    prefill outputs of both sides (computed once)."""

    model: Any
    dtype: torch.dtype
    steps: int
    prompt: Prompt
    runtime: StaticGemma4Runtime
    ours: PrefillOutputs
    theirs: Any

    @property
    def config(self) -> Any:
        return self.model.config

    @property
    def tolerance(self) -> float:
        return RELATIVE_TOLERANCE[self.dtype]

    def row(self, stage: str, check: str, ours: torch.Tensor, theirs: torch.Tensor, *, exact: bool = False) -> Row:
        """Max abs diff of ``ours`` vs ``theirs`` against the dtype's relative tolerance (or 0)."""
        error = float((ours.float() - theirs.float()).abs().max())
        tolerance = 0.0 if exact else self.tolerance * max(1.0, float(theirs.float().abs().max()))
        return Row(stage, check, "max abs diff", error, tolerance)


def open_session(
    model: Any, *, dtype: torch.dtype = torch.float32, max_seq: int | None = None, steps: int | None = None
) -> Session:
    """Prepare a verification run: a ragged batch-2 sample prompt (with one image per row on a
    multimodal model), a runtime sized for it plus ``steps`` decode steps, and both prefills."""
    if dtype not in RELATIVE_TOLERANCE:
        raise ValueError(f"dtype must be one of {list(RELATIVE_TOLERANCE)}, got {dtype}")
    model = model if dtype == torch.float32 else copy.deepcopy(model).to(dtype)
    text_config = model.config.get_text_config()
    window = text_config.sliding_window
    steps = steps if steps is not None else min(2 * window + 3, 24)
    if getattr(model.model, "vision_tower", None) is not None:
        prompt = image_prompt(model.config, text_after=[6, 2])
    else:
        prompt = text_prompt(model.config, [window + 3, window // 2])
    needed = prompt.input_ids.shape[1] + steps + 1
    max_seq = needed if max_seq is None else max_seq
    if max_seq < needed:
        raise ValueError(f"max_seq must be at least {needed} for this prompt and {steps} steps, got {max_seq}")
    runtime = StaticGemma4Runtime(
        model,
        max_seq=max_seq,
        batch_size=prompt.input_ids.shape[0],
        **prompt.image_slot,
    )
    ours = runtime.prefill_outputs(
        prompt.input_ids, prompt.attention_mask, prompt.pixel_values, prompt.image_position_ids, keep_intermediates=True
    )
    return Session(model, dtype, steps, prompt, runtime, ours, hf_prefill(model, prompt))


def _text_model(model: Any) -> Any:
    return getattr(model.model, "language_model", model.model)


def input_rows(session: Session) -> Iterator[Row]:
    """Static inputs, token embedding, PLE, vision prefill and fusion vs what HF computes."""
    prompt, inputs, runtime = session.prompt, session.ours.inputs, session.runtime
    length = prompt.input_ids.shape[1]
    llm_ids = prompt.input_ids.clone()
    if runtime.image_token_id is not None:
        llm_ids[llm_ids == runtime.image_token_id] = runtime.pad_token_id
    mismatches = (
        int((inputs.input_ids[:, :length] != llm_ids).sum())
        + int((inputs.valid[:, :length] != prompt.attention_mask.bool()).sum())
        + int(inputs.valid[:, length:].sum())
        + int((inputs.valid_length != prompt.attention_mask.sum(dim=1)).sum())
        + int((inputs.mm_token_type_ids[:, :length] != prompt.mm_token_type_ids).sum())
    )
    yield Row("static inputs", "ids, valid mask, lengths, image slot", "mismatched entries", mismatches, 0)
    yield session.row(
        "token embedding",
        "vs get_input_embeddings",
        session.ours.embeddings,
        session.model.get_input_embeddings()(inputs.input_ids),
        exact=True,
    )
    text_model = _text_model(session.model)
    fused = session.ours.hidden_states[0]
    theirs = text_model.project_per_layer_inputs(fused, text_model.get_per_layer_inputs(inputs.input_ids, None))
    yield session.row("PLE", "vs project_per_layer_inputs", session.ours.per_layer_inputs, theirs)
    if session.ours.soft_tokens is not None:
        pooled = session.model.model.get_image_features(prompt.pixel_values, prompt.image_position_ids).pooler_output
        yield session.row("vision prefill", "vs get_image_features", session.ours.soft_tokens, torch.stack(pooled))
        embeds, soft = session.ours.embeddings, session.ours.soft_tokens
        scattered = embeds.masked_scatter(
            inputs.mm_token_type_ids.bool()[..., None].expand_as(embeds), soft.reshape(-1, soft.shape[-1])
        )
        yield session.row("fusion", "vs masked_scatter", fused, scattered, exact=True)


def layer_rows(session: Session) -> Iterator[Row]:
    """Every decoder layer's output (grouped), every producing layer's K/V and the prefill logits."""
    valid = session.prompt.attention_mask.bool()
    pairs = paired_hidden_states(session.model, session.ours.hidden_states, session.theirs.hidden_states, valid)[1:]
    for start in range(0, len(pairs), LAYER_GROUP):
        group = pairs[start : start + LAYER_GROUP]
        mine, reference = torch.cat([a for a, _ in group]), torch.cat([b for _, b in group])
        last = start + len(group) - 1
        yield session.row("decoder layers", f"layers {start}-{last} hidden states", mine, reference)
    kv = paired_kv(session.runtime.cache, session.theirs.cache, valid)
    for kind in ("K", "V"):
        chosen = [(a, b) for name, a, b in kv if name.endswith(kind)]
        yield session.row(
            "KV cache",
            f"{kind} of {len(chosen)} producing layers vs HF cache",
            torch.cat([a.flatten() for a, _ in chosen]),
            torch.cat([b.flatten() for _, b in chosen]),
        )
    rows = torch.arange(valid.shape[0])
    hf_logits = session.theirs.logits[rows, session.prompt.last_index]
    yield session.row("prefill logits", "last valid token per row", session.ours.logits, hf_logits)
    if session.dtype == torch.float32:
        flips = int((session.ours.logits.argmax(-1) != hf_logits.argmax(-1)).sum())
        yield Row("prefill logits", "argmax agreement", "rows with another argmax", flips, 0)


def decode_rows(session: Session) -> Iterator[Row]:
    """``steps`` decode steps per row vs HF's DynamicCache, then greedy generation vs HF generate."""
    prompt, runtime = session.prompt, session.runtime
    batch = prompt.input_ids.shape[0]
    vocab = session.config.get_text_config().vocab_size
    tokens = torch.randint(3, min(vocab, 400), (batch, session.steps), generator=torch.Generator().manual_seed(1))
    ours = torch.stack([runtime.decode_one(tokens[:, t : t + 1]) for t in range(session.steps)], dim=1)
    theirs = torch.stack([hf_decode_logits(session.model, prompt.row(row), tokens[row]) for row in range(batch)])
    yield session.row("decode steps", f"{batch} rows x {session.steps} steps, logits", ours, theirs)
    if session.dtype != torch.float32:
        return  # greedy ties may flip legitimately at bf16 precision
    generated = runtime.generate(
        prompt.input_ids,
        prompt.attention_mask,
        max_new_tokens=session.steps,
        pixel_values=prompt.pixel_values,
        image_position_ids=prompt.image_position_ids,
    )
    expected = torch.stack(
        [
            hf_generate(session.model, prompt.row(row), max_new_tokens=session.steps, eos_token_id=None)
            for row in range(batch)
        ]
    )
    mismatched = int((generated != expected).sum())
    yield Row(
        "generation",
        f"{batch} rows x {session.steps} greedy tokens vs HF generate",
        "tokens not matched",
        mismatched,
        0,
    )


def export_rows(session: Session) -> Iterator[Row]:
    """Each stage exported with torch.export (one representative layer per type and K/V role, in
    prefill, chunk and decode mode) replays its eager output."""
    cases = stage_cases(
        session.runtime,
        pixel_values=session.prompt.pixel_values,
        image_position_ids=session.prompt.image_position_ids,
        representative=True,
    )
    worst, tolerance = 0.0, 0.0
    for case in cases:
        eager, exported = case.module(*case.args), export_case(case).module()(*case.args)
        for mine, reference in zip(_flatten(exported), _flatten(eager), strict=True):
            worst = max(worst, float((mine.float() - reference.float()).abs().max()))
            tolerance = max(tolerance, 1e-6 * max(1.0, float(reference.float().abs().max())))
    yield Row("export round-trip", f"{len(cases)} stages, exported vs eager", "max abs diff", worst, tolerance)


def _flatten(value: Any) -> list[torch.Tensor]:
    return [item for part in value for item in _flatten(part)] if isinstance(value, tuple | list) else [value]


def rope_rows(session: Session) -> Iterator[Row]:
    """RoPE per layer type and dtype vs ``Gemma4TextRotaryEmbedding``, positions ``[0, 4100)``."""
    config = session.config
    positions = torch.arange(ROPE_POSITIONS)[None]
    for dtype, tolerance in ROPE_TOLERANCE.items():
        ours, theirs = build_rope(config, positions, dtype=dtype), hf_rope(config, positions, dtype=dtype)
        for name, (cos, sin) in ours.items():
            hf_cos, hf_sin = theirs[name]
            error = max(float((cos - hf_cos).abs().max()), float((sin - hf_sin).abs().max()))
            yield Row("RoPE", f"{name} {str(dtype).removeprefix('torch.')}", "max abs diff", error, tolerance)


def _mismatches(ours: dict[str, torch.Tensor], theirs: dict[str, torch.Tensor]) -> dict[str, int]:
    return {name: int((ours[name] != theirs[name]).sum()) for name in ours}


def prefill_mask_rows(session: Session) -> Iterator[Row]:
    """Prefill masks vs HF under each attention implementation, over lengths x batch x padding."""
    config = session.config
    window = read_text_config(config).sliding_window
    for attn_implementation in ATTN_IMPLEMENTATIONS:
        totals: dict[str, int] = {}
        cases = 0
        for kind in LENGTHS:
            for batch in (1, 3):
                for padding in PADDINGS:
                    valid = valid_mask(padding, batch, sequence_length(kind, window))
                    theirs = hf_prefill_bool_masks(config, valid, attn_implementation=attn_implementation)
                    for name, count in _mismatches(build_prefill_bool_masks(config, valid), theirs).items():
                        totals[name] = totals.get(name, 0) + count
                    cases += 1
        for name, count in totals.items():
            yield Row(
                "masks prefill", f"{name} {attn_implementation} ({cases} layouts)", "mismatched entries", count, 0
            )


def decode_mask_rows(session: Session) -> Iterator[Row]:
    """Decode masks vs HF with a DynamicCache, as visible absolute positions around the window edges."""
    config = session.config
    window = read_text_config(config).sliding_window
    positions = sorted({1, window - 1, window, window + 1, 2 * window + 3})
    for attn_implementation in ATTN_IMPLEMENTATIONS:
        totals: dict[str, int] = {}
        for position in positions:
            valid = valid_mask("left", 3, position + 1)
            theirs = hf_decode_visible_positions(config, valid, attn_implementation=attn_implementation)
            ours = {k: v[:, 0, 0] for k, v in build_decode_bool_masks(config, valid, position).items()}
            for name, count in _mismatches(ours, theirs).items():
                totals[name] = totals.get(name, 0) + count
        for name, count in totals.items():
            yield Row(
                "masks decode", f"{name} {attn_implementation} (positions {positions})", "mismatched slots", count, 0
            )


def vision_mask_rows(session: Session) -> Iterator[Row]:
    """Vision-bidirectional prefill masks vs HF's vision mask path (only for such models)."""
    config = session.config
    if read_text_config(config).use_bidirectional_attention != "vision":
        return
    window = read_text_config(config).sliding_window
    length = 3 * window + 4
    types = torch.zeros(2, length, dtype=torch.long)
    types[0, 2 : 2 + 2 * window] = 1  # an image block longer than the window
    types[1, 1 : 1 + window // 2] = 1
    types[1, 2 + window // 2 : 2 + window] = 1
    valid = valid_mask("right", 2, length)
    ours = build_prefill_bool_masks(config, valid, mm_token_type_ids=types)
    for attn_implementation in ATTN_IMPLEMENTATIONS:
        theirs = hf_prefill_bool_masks(config, valid, attn_implementation=attn_implementation, mm_token_type_ids=types)
        for name, count in _mismatches(ours, theirs).items():
            yield Row("masks vision", f"{name} {attn_implementation}", "mismatched entries", count, 0)


STAGES: tuple[Callable[[Session], Iterator[Row]], ...] = (
    input_rows,
    prefill_mask_rows,
    decode_mask_rows,
    vision_mask_rows,
    rope_rows,
    layer_rows,
    decode_rows,
)


@torch.no_grad()
def run_verification(
    model: Any,
    *,
    dtype: torch.dtype = torch.float32,
    max_seq: int | None = None,
    steps: int | None = None,
    export: bool = True,
    on_row: Callable[[Row], None] = lambda row: None,
) -> list[Row]:
    """Run every stage check on ``model`` (an HF Gemma 4 model); ``on_row`` sees each row as it finishes."""
    session = open_session(model, dtype=dtype, max_seq=max_seq, steps=steps)
    rows = []
    for stage in (*STAGES, export_rows) if export else STAGES:
        for row in stage(session):
            on_row(row)
            rows.append(row)
    return rows


def format_row(row: Row) -> str:
    status = "PASS" if row.passed else "FAIL"
    return f"{status}  {row.stage:<17} {row.check:<58} {row.metric} = {row.value:.3g} (tolerance {row.tolerance:.3g})"


def write_json(rows: list[Row], path: Path, *, model: str) -> None:
    report = {
        "model": model,
        "passed": all(row.passed for row in rows),
        "rows": [row.as_dict() for row in rows],
    }
    path.write_text(json.dumps(report, indent=2) + "\n")
