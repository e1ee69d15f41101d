"""Every output a port returns is judged, in every profile: each field of ``PortPrefill`` (and the
results of ``decode`` and ``generate``) broken alone in a port that is otherwise this runtime makes
``verify`` fail, in float32 and in bfloat16. A field added to ``PortPrefill`` without a check that
reads it fails here: the list below must name every field."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from gemma4_static.oracle.flow.verify import verify
from gemma4_static.oracle.groups import names
from gemma4_static.oracle.options import VerifyOptions
from gemma4_static.ports import PortPrefill
from gemma4_static.ports.static import StaticRuntimePort

pytestmark = pytest.mark.self_test
FIELDS = ("logits", "hidden_states", "per_layer_inputs", "soft_tokens", "all_logits", "chunk_logits")
UNJUDGED = ("extra",)  # free-form: what a port keeps for itself
CHECKED = tuple(group for group in names() if group not in ("export", "routing"))


def shifted(value):
    """``value`` negated (a tensor, or each tensor of a tuple): wrong under any metric a profile gates."""
    if isinstance(value, tuple):
        return tuple(shifted(item) for item in value)
    return -value


class BrokenOutput(StaticRuntimePort):
    """This runtime with one of its outputs broken (``broken``: a PortPrefill field, ``decode`` or
    ``generate``): tensors negated, generated tokens each the next id."""

    broken = ""

    def prefill(self, prompt, *, keep_intermediates=False):
        result = super().prefill(prompt, keep_intermediates=keep_intermediates)
        value = getattr(result, self.broken, None) if self.broken in FIELDS else None
        return result if value is None else dataclasses.replace(result, **{self.broken: shifted(value)})

    def decode(self, next_ids):
        logits = super().decode(next_ids)
        return -logits if self.broken == "decode" else logits

    def generate(self, prompt, *, max_new_tokens, eos_token_id=None):
        tokens = super().generate(prompt, max_new_tokens=max_new_tokens, eos_token_id=eos_token_id)
        return (tokens + 1) % self.config.get_text_config().vocab_size if self.broken == "generate" else tokens


def broken(name):
    return type(f"Broken_{name}", (BrokenOutput,), {"broken": name})


for _name in (*FIELDS, "decode", "generate"):
    globals()[f"Broken_{_name}"] = broken(_name)


def test_the_list_names_every_field():
    assert {field.name for field in dataclasses.fields(PortPrefill)} == set(FIELDS) | set(UNJUDGED)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("output", [*FIELDS, "decode", "generate"])
def test_each_output_broken_alone_fails_verify(output, dtype, tiny_model):
    result = verify(
        tiny_model, VerifyOptions(dtype=dtype, port=f"{__name__}:Broken_{output}", groups=CHECKED, schedules_budget=60)
    )
    failed = sorted({row.stage for row in result.rows if row.failed})
    assert failed, f"{output} broken in {dtype} and nothing failed: {result.verdict.summary()}"


class BrokenPlainLogits(StaticRuntimePort):
    """This runtime whose plain prefill (no intermediates asked: the path a deployment runs) gathers
    the logits one token before the last; asked for intermediates, it is right."""

    def prefill(self, prompt, *, keep_intermediates=False):
        result = super().prefill(prompt, keep_intermediates=True)
        if keep_intermediates:
            return result
        before_last = prompt.attention_mask.sum(dim=1) - 2  # right-padded rows
        return PortPrefill(result.all_logits[torch.arange(len(before_last)), before_last])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_a_port_wrong_only_on_its_plain_prefill_fails_the_prefill_logits(dtype, tiny_model):
    result = verify(tiny_model, VerifyOptions(dtype=dtype, port=f"{__name__}:BrokenPlainLogits", groups=("layers",)))
    failed = [row for row in result.rows if row.failed]
    assert failed and all(row.stage == "prefill logits" and "plain prefill" in row.check for row in failed)
