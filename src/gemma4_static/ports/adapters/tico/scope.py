"""What Samsung TICO's own code accounts for, as the ``tico-gemma4`` port's expected failures: each
only where it holds for the run (the model's attention over images, the fold in its vision prefill)."""

from __future__ import annotations

from typing import Any

# the stages an image's soft tokens reach (every one after fusion, on an image prompt)
AFTER_FUSION = ("decoder layers", "KV cache", "prefill logits", "decode steps", "generation", "schedules", "fuzz")
# float32 error its folded patch projection costs, relative to the float32 tolerance: measured 1.51x
# (every-position logits) and 1.31x (decode steps) on e2b-multimodal; beyond 2x a row is something else
FOLD_SLACK = 2.0


def explanation(port: str, row: Any, *, bidirectional: bool, folded: bool) -> str | None:
    """Two divergences: on a model with bidirectional attention inside image blocks
    (``use_bidirectional_attention="vision"``) its masks stay causal over image tokens, as E2B's; its
    vision prefill folds ``2 (x - 0.5)`` into the patch projection (``folded``:
    ``QuantGemma4VisionPatchEmbedder``, no Sub or Mul in the Circle graph), which in float32 leaves
    the soft tokens ~10x further from float64 than HF's (the folded bias ``-sum(W)`` cancels against
    ``2Wx``), carried by every stage after fusion: a row up to :data:`FOLD_SLACK` times its tolerance."""
    if bidirectional and row.stage in ("masks vision", *AFTER_FUSION):
        return (
            f"{port} builds masks causal over image tokens, as E2B's (use_bidirectional_attention unset); this "
            "model attends bidirectionally inside image blocks"
        )
    within = row.metric == "max abs diff" and row.value <= FOLD_SLACK * row.tolerance
    if folded and within and row.stage in AFTER_FUSION:
        return (
            f"{port} folds 2 (x - 0.5) into its patch projection (QuantGemma4VisionPatchEmbedder): in float32 its soft "
            "tokens lie ~10x further from float64 than HF's, carried by every stage after fusion (with HF's "
            "unfolded projection the same row passes)"
        )
    return None
