"""Left-padded batches, as HF's batched ``generate`` is usually fed (``padding_side="left"``), against
HF run on the very same left-padded batch (not row by row): prefill logits, every decode step's
logits and the greedy tokens, text and image prompts.

The runtime lays each row's valid tokens first; HF keeps them where they are and counts positions
from column 0 on a plain forward, so a left-padded row's positions are shifted by its padding on
HF's side. RoPE and both mask kinds depend only on distances between valid tokens, so the results
agree to the fp32 tolerance of the rest of the suite (``tolerances.RELATIVE``: ``2e-5 * max(1,
max|HF|)``; the shifted angles round differently in the last bits); tokens must be identical.
"""

from __future__ import annotations

import pytest
import torch
from transformers import GenerationConfig

from gemma4_static.oracle.checks import parity
from gemma4_static.oracle.references.samples import Prompt, image_prompt, text_prompt
from gemma4_static.oracle.results import tolerances
from gemma4_static.oracle.results.report import assert_rows_pass, merge
from gemma4_static.ports import PortSetup
from gemma4_static.ports.static import StaticRuntimePort
from gemma4_static.runtime import StaticGemma4Runtime

STEPS = 8


def _left_padded(prompt: Prompt, image_token_id: int | None) -> dict[str, torch.Tensor]:
    """HF's keyword arguments for ``prompt`` left-padded (image token types where the placeholders went)."""
    ids, mask = prompt.left_padded()
    kwargs = {"input_ids": ids, "attention_mask": mask}
    if prompt.pixel_values is not None:
        kwargs.update(
            pixel_values=prompt.pixel_values,
            image_position_ids=prompt.image_position_ids,
            mm_token_type_ids=((ids == image_token_id) & mask.bool()).long(),
        )
    return kwargs


def _case(model, kind: str) -> Prompt:
    if kind == "image":
        return image_prompt(model.config, text_after=[0, 9, 4])
    if kind == "two-images":  # rows with two, one (the second) and one (the first) image of different sizes
        with_image = [(True, True), (False, True), (True, False)]
        return image_prompt(model.config, text_after=[0, 9, 4], with_image=with_image, then=((3, (40, 72), 140),))
    window = model.config.get_text_config().sliding_window
    return text_prompt(model.config, [1, window + 3, window // 2], seed=3)  # batch 3, lengths 1 .. past W


@pytest.mark.parametrize(
    ("model_name", "kind"),
    [("tiny", "text"), ("tiny", "image"), ("tiny", "two-images"), ("e2b-geometry", "text")],
    ids=["tiny-text", "tiny-image", "tiny-two-images", "e2b-geometry-text"],
)
def test_left_padded_batch_equals_hf_on_the_same_batch(request, model_name, kind, report):
    model = request.getfixturevalue("tiny_model" if model_name == "tiny" else "e2b_model")
    prompt = _case(model, kind)
    hf_inputs = _left_padded(prompt, getattr(model.config, "image_token_id", None))
    assert bool((hf_inputs["attention_mask"][:, 0] == 0).any())  # some row really is left-padded
    text = model.config.get_text_config()
    generation = GenerationConfig(
        do_sample=False,
        max_new_tokens=STEPS,
        eos_token_id=text.eos_token_id,
        pad_token_id=text.pad_token_id,
        output_logits=True,
        return_dict_in_generate=True,
    )
    hf = model.generate(**hf_inputs, generation_config=generation)
    hf_tokens = hf.sequences[:, hf_inputs["input_ids"].shape[1] :]
    hf_logits = torch.stack(hf.logits, dim=1)  # (B, STEPS, vocab)

    runtime = StaticGemma4Runtime(
        model, max_seq=prompt.input_ids.shape[1] + STEPS, batch_size=3, image_slots=prompt.image_slots
    )
    images = {key: hf_inputs[key] for key in ("pixel_values", "image_position_ids") if key in hf_inputs}
    ours = [runtime.prefill(hf_inputs["input_ids"], hf_inputs["attention_mask"], **images)]
    ours += [runtime.decode_one(hf_tokens[:, step : step + 1]) for step in range(STEPS - 1)]
    ours_logits = torch.stack(ours, dim=1)
    rows = [
        parity.compare(
            "left padding",
            f"step {step} logits",
            ours_logits[:, step],
            hf_logits[:, step],
            tolerances.scaled(tolerances.RELATIVE[torch.float32], hf_logits[:, step]),
        )
        for step in range(STEPS)
    ]
    tokens = runtime.generate(
        hf_inputs["input_ids"],
        hf_inputs["attention_mask"],
        max_new_tokens=STEPS,
        eos_token_id=text.eos_token_id,
        **images,
    )
    worst = merge(rows, "left padding", "logits").value
    report(f"left-padded {kind} batch: prefill + {STEPS - 1} decode logits vs HF {worst:.3g}; tokens equal")
    assert_rows_pass(rows)
    assert torch.equal(tokens, hf_tokens), (tokens, hf_tokens)


def test_the_ports_per_position_outputs_keep_a_left_padded_prompts_layout(tiny_model):
    """The runtime computes with each row's valid tokens first; as a port it hands back the logits
    at every position and each layer's hidden states laid out as the prompt came (left-padded), so
    a caller reading position ``j`` of its prompt reads HF's position ``j`` of the same batch (a
    one-token row's only position included: read from the static layout it was 31.7 off)."""
    prompt = text_prompt(tiny_model.config, [12, 1, 5], seed=4).padded("left")
    port = StaticRuntimePort(tiny_model, PortSetup(16, 3))
    ours = port.prefill(prompt, keep_intermediates=True)
    theirs = tiny_model(**_left_padded(prompt, None), output_hidden_states=True)
    valid = prompt.attention_mask.bool()
    row = parity.stage_row("prefill logits", "every valid position", ours.all_logits[valid], theirs.logits[valid],
                           torch.float32)  # fmt: skip
    assert_rows_pass([row])
    first_layer = theirs.hidden_states[1][valid]  # its output (HF's last one is after the final norm)
    error = (ours.hidden_states[1][valid] - first_layer).abs().max()
    assert error <= tolerances.relative(torch.float32, first_layer)
