"""Several images per prompt: a runtime with two image slots of different sizes and vision profiles
(the first image right after BOS at 70 soft tokens, the second mid-prompt at 140) against HF on the
same batch: prefill masks with both image blocks, the soft tokens of every image, fusion, prefill
logits and greedy tokens; the same runtime serves batches whose rows hold two, one or no images
(a slot a row leaves empty holds text), single-shot and chunked.

Tolerances: masks and fusion exactly (the same booleans, the same values moved); soft tokens and
logits within ``tolerances.RELATIVE`` (fp32: ``2e-5 * max(1, max|HF|)``, summation-order noise of
the same op sequence); greedy tokens by the token rule (no divergence at a decided step).
"""

from __future__ import annotations

import pytest
import torch

from gemma4_static.oracle.checks import parity, parity_masks
from gemma4_static.oracle.references.hf import hf_prefill
from gemma4_static.oracle.references.samples import Prompt, image_prompt
from gemma4_static.oracle.results.report import assert_rows_pass, merge
from gemma4_static.ports.static import StaticRuntimePort
from gemma4_static.runtime import StaticGemma4Runtime

FP32 = torch.float32
SECOND_IMAGE = (5, (40, 72), 140)  # 5 text tokens after the first image, then an image processed at 140
ROWS = {
    "two-images-every-row": [(True, True)] * 3,
    "two-one-none": [(True, True), (False, True), (False, False)],
    "first-slot-only": [(True, False), (True, False), (False, False)],
    "text-only": [(False, False)] * 3,
}


def _prompt(model, with_image, *, gap: int = SECOND_IMAGE[0]) -> Prompt:
    return image_prompt(
        model.config, text_after=[9, 4, 1], text_before=1, with_image=with_image, then=((gap, *SECOND_IMAGE[1:]),)
    )


def _rows(model, runtime: StaticGemma4Runtime, prompt: Prompt) -> list:
    """Masks (single shot), soft tokens and fusion (when the batch holds images), logits, greedy tokens."""
    port = StaticRuntimePort.around(runtime, model.config)
    rows = []
    if runtime.layout.prefill_chunk is None:
        valid, types = prompt.attention_mask.bool(), prompt.mm_token_type_ids
        for implementation in ("eager", "sdpa"):
            masks = parity_masks.prefill_mask_rows(
                model.config, valid, implementation, port.prefill_masks, mm_token_type_ids=types
            )
            rows.append(merge(masks, "prefill masks", f"two image blocks ({implementation})"))
    inputs = runtime.build_inputs(prompt.input_ids, prompt.attention_mask)
    outputs = runtime.prefill_outputs(inputs, prompt.pixel_values, prompt.image_position_ids, keep_intermediates=True)
    if prompt.pixel_values is not None:
        rows.append(parity.vision_row(model, prompt, outputs.soft_tokens, FP32))
        if outputs.hidden_states is not None:  # single shot: the fused embeddings are kept
            rows.append(parity.fusion_row(outputs))
    theirs = hf_prefill(model, prompt).logits[torch.arange(3), prompt.last_index]
    rows += parity.logits_rows(outputs.logits, theirs, FP32)
    return rows + parity.generation_rows(model, port, prompt, max_new_tokens=6)


@pytest.mark.parametrize(("model_name", "case"), [*(("tiny", case) for case in ROWS), ("e2b-vision", "two-one-none")])
def test_two_image_slots_match_hf(request, model_name, case, report):
    vision_model = request.getfixturevalue({"tiny": "tiny_model", "e2b-vision": "e2b_vision_model"}[model_name])
    prompt = _prompt(vision_model, ROWS[case])
    (first, _), (second, tokens) = prompt.image_slots
    assert first == 2 and second > first + 5  # one right after BOS (and boi), one mid-prompt
    runtime = StaticGemma4Runtime(
        vision_model, max_seq=prompt.input_ids.shape[1] + 6, batch_size=3, image_slots=prompt.image_slots
    )
    assert runtime.layout.vision_profiles == (70, 140) and tokens > 70  # the second slot needs its own profile
    rows = _rows(vision_model, runtime, prompt)
    logits = next(row for row in rows if row.stage == "prefill logits")
    report(f"slots {prompt.image_slots}, rows {ROWS[case]}: logits vs HF {logits.value:.3g}")
    assert_rows_pass(rows)


def test_two_image_slots_in_two_chunks_match_hf(tiny_model, report):
    """Chunked prefill of 128 tokens with the first image in chunk 0 and the second filling most of
    chunk 1 (each slot inside one chunk, as the layout requires)."""
    chunk = 128
    ((_, first),) = image_prompt(tiny_model.config, text_after=[1], text_before=1).image_slots
    prompt = _prompt(tiny_model, ROWS["two-one-none"], gap=chunk - first - 4)  # BOS boi first eoi gap boi
    assert prompt.image_slots[1][0] == chunk
    runtime = StaticGemma4Runtime(
        tiny_model, max_seq=3 * chunk, batch_size=3, image_slots=prompt.image_slots, prefill_chunk=chunk
    )
    rows = _rows(tiny_model, runtime, prompt)
    report(f"chunked ({chunk}), slots {prompt.image_slots}: logits vs HF {rows[1].value:.3g}")
    assert_rows_pass(rows)
