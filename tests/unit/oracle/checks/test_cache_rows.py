"""Two static caches compared slot by slot: a K row and a V row per producing layer, each under
its own name, over the slots that hold a position."""

from __future__ import annotations

from gemma4_static.oracle.checks.parity import cache_rows
from gemma4_static.oracle.references.samples import text_prompt
from gemma4_static.runtime import StaticGemma4Runtime


def test_each_producing_layer_has_its_k_and_v_rows(tiny_model):
    runtime = StaticGemma4Runtime(tiny_model, max_seq=16)
    prompt = text_prompt(tiny_model.config, [9])
    runtime.prefill(prompt.input_ids, prompt.attention_mask)
    rows = cache_rows("chunked prefill", runtime.cache, runtime.cache)
    producers = list(runtime.cache.keys)
    assert [row.check for row in rows] == [f"layer {layer} {kind}" for layer in producers for kind in ("K", "V")]
    assert all(row.stage == "chunked prefill" and row.value == 0 and not row.failed for row in rows)
