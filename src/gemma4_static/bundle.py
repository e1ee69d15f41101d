"""A deployable text bundle: one ExecuTorch program whose KV cache lives inside it, with a
``prefill`` method (a chunk of ``C`` tokens) and a ``decode`` method (one token) sharing the cache
buffers (ExecuTorch's memory planning with ``share_mutable_buffers``), plus a manifest whose
calling convention a runner in any language can follow (:data:`CONVENTION`).

The CPU side stays with the caller: positions, the additive masks per layer type and the cache
slots each step's K/V go to (:func:`~gemma4_static.executorch.step_inputs.step_inputs` builds them from the
runtime's own mask table and cache bookkeeping; a C++ runner builds them from the manifest).
"""

from __future__ import annotations

import json
from pathlib import Path

from .executorch.cache_program import cached_stack, lower_program
from .executorch.step_inputs import prefill_method_tokens
from .runtime import StaticGemma4Runtime
from .spec import SLIDING_ATTENTION

CONVENTION = """\
Each call feeds S tokens per row (S = the method's "tokens"); rows are padded on the right, a row's
valid tokens first. Inputs, in order: input_ids (B, S) int64 (placeholder ids replaced by pad_token_id);
embeddings (B, S, hidden_size) and embedded (B, S, 1), both in the model's dtype: a token whose
embedded is 1.0 enters as its row of embeddings (an image's soft token), one with 0.0 as its own
token embedding (text: zeros for both); positions (B, S) int64 (a row's absolute positions;
padding may repeat the last one); last_index (B,) int64 (which of the S outputs to return per
row); then one additive mask per layer type (B, 1, S, K) in the manifest's order (0.0 = allowed,
mask_fill = forbidden); then one slot tensor per layer type (B, S) int64. Output: logits (B, vocab) at last_index.
Keys of a layer type that keeps max_seq slots: K = max_seq, slot k holds position k once written.
Keys of a ring layer type (capacity R < max_seq): K = R + S, the R ring slots as they were before
this call (slot s holds the last position p < before with p mod R == s, else nothing), then this
call's S tokens. A query at position q may see a key at position k (held, not padding) iff k <= q,
and on a sliding layer type also q - k < window.
Slots: where a token is kept (a valid token; on a ring, also among its row's last R kept tokens of
the call) its slot is p (max_seq slots) or p mod R (ring); elsewhere the bin slot = capacity.
The cache starts empty (zeros); a new conversation overwrites what it needs (masks hide the rest)."""


def export_bundle(runtime: StaticGemma4Runtime, folder: str | Path, *, prefill_tokens: int | None = None) -> Path:
    """Write ``folder/model.pte`` (methods ``prefill`` of ``prefill_tokens`` tokens, by default the
    runtime's own program's, and ``decode`` of one, sharing the cache) and ``folder/manifest.json``;
    returns the manifest path."""
    layout = runtime.layout
    prefill_tokens = prefill_method_tokens(layout) if prefill_tokens is None else prefill_tokens
    if layout.has_image_slot:
        raise ValueError("a bundle is text-only: build the runtime without image_slots")
    if not isinstance(prefill_tokens, int) or prefill_tokens < 1 or layout.max_seq % prefill_tokens:
        raise ValueError(
            f"prefill_tokens must be a positive divisor of max_seq={layout.max_seq}, got {prefill_tokens!r}"
        )
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    module = cached_stack(runtime.modules, runtime.stack)
    (folder / "model.pte").write_bytes(lower_program(module, runtime.stack, prefill_tokens))
    text = runtime.spec.text
    manifest = {
        "layout": "cache-in-program",
        "file": "model.pte",
        "batch_size": layout.batch_size,
        "max_seq": layout.max_seq,
        "methods": {"prefill": {"tokens": prefill_tokens}, "decode": {"tokens": 1}},
        "layer_types": [
            {
                "name": name,
                "capacity": runtime.cache.capacity[name],
                "ring": runtime.cache.is_ring(name),
                "window": text.sliding_window if name == SLIDING_ATTENTION else None,
            }
            for name in dict.fromkeys(text.layer_types)
        ],
        "mask_fill": runtime.mask_value,
        "pad_token_id": runtime.spec.pad_token_id,
        "vocab_size": runtime.spec.vocab_size,
        "hidden_size": runtime.spec.hidden_size,
        "dtype": str(runtime.spec.dtype).removeprefix("torch."),
        "convention": CONVENTION.splitlines(),
    }
    path = folder / "manifest.json"
    path.write_text(json.dumps(manifest, indent=2) + "\n")
    return path
