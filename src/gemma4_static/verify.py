"""The side-by-side verification flow: each stage of the static runtime against HF, one report row
per check, with the metric, the tolerance and PASS/FAIL."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from .config import read_text_config
from .layouts import LENGTHS, PADDINGS, sequence_length, valid_mask
from .masks import build_decode_bool_masks, build_prefill_bool_masks
from .reference import ATTN_IMPLEMENTATIONS, hf_decode_visible_positions, hf_prefill_bool_masks, hf_rope
from .rope import build_rope

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


def rope_rows(config: Any) -> Iterator[Row]:
    """RoPE per layer type and dtype vs ``Gemma4TextRotaryEmbedding``, positions ``[0, 4100)``."""
    positions = torch.arange(ROPE_POSITIONS)[None]
    for dtype, tolerance in ROPE_TOLERANCE.items():
        ours, theirs = build_rope(config, positions, dtype=dtype), hf_rope(config, positions, dtype=dtype)
        for name, (cos, sin) in ours.items():
            hf_cos, hf_sin = theirs[name]
            error = max(float((cos - hf_cos).abs().max()), float((sin - hf_sin).abs().max()))
            yield Row("RoPE", f"{name} {str(dtype).removeprefix('torch.')}", "max abs diff", error, tolerance)


def _mismatches(ours: dict[str, torch.Tensor], theirs: dict[str, torch.Tensor]) -> dict[str, int]:
    return {name: int((ours[name] != theirs[name]).sum()) for name in ours}


def prefill_mask_rows(config: Any) -> Iterator[Row]:
    """Prefill masks vs HF under each attention implementation, over lengths x batch x padding."""
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


def decode_mask_rows(config: Any) -> Iterator[Row]:
    """Decode masks vs HF with a DynamicCache, as visible absolute positions around the window edges."""
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


def vision_mask_rows(config: Any) -> Iterator[Row]:
    """Vision-bidirectional prefill masks vs HF's vision mask path (only for such models)."""
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


STAGES: tuple[Callable[[Any], Iterator[Row]], ...] = (rope_rows, prefill_mask_rows, decode_mask_rows, vision_mask_rows)


def run_verification(model: Any, *, on_row: Callable[[Row], None] = lambda row: None) -> list[Row]:
    """Run every stage check on ``model`` (an HF Gemma 4 model); ``on_row`` sees each row as it finishes."""
    rows = []
    for stage in STAGES:
        for row in stage(model.config):
            on_row(row)
            rows.append(row)
    return rows


def format_row(row: Row) -> str:
    status = "PASS" if row.passed else "FAIL"
    return f"{status}  {row.stage:<14} {row.check:<58} {row.metric} = {row.value:.3g} (tolerance {row.tolerance:.3g})"


def write_json(rows: list[Row], path: Path, *, model: str) -> None:
    report = {
        "model": model,
        "passed": all(row.passed for row in rows),
        "rows": [row.as_dict() for row in rows],
    }
    path.write_text(json.dumps(report, indent=2) + "\n")
