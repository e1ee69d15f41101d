"""Every output a port returns is judged, in every profile: each field of ``PortPrefill`` (and the
results of ``decode`` and ``generate``) broken alone in a port that is otherwise this runtime makes
``verify`` fail, in float32 and in bfloat16. A field added to ``PortPrefill`` without a check that
reads it fails ``tests/unit/oracle/fuzz/test_fuzz_outputs.py`` (the list must name every field;
the fuzzer's twin of this test runs in the default suite there)."""

from __future__ import annotations

import pytest
import torch

from gemma4_static.oracle.flow.verify import verify
from gemma4_static.oracle.options import VerifyOptions
from gemma4_static.ports import PortPrefill
from gemma4_static.ports.static import StaticRuntimePort
from tests.unit.oracle.broken_outputs import OUTPUTS

pytestmark = pytest.mark.self_test
# each output, the group that judges it and the one stage that fails when it alone is broken
JUDGED_BY = {
    "logits": ("layers", "prefill logits"),
    "hidden_states": ("layers", "decoder layers"),
    "per_layer_inputs": ("inputs", "PLE"),
    "soft_tokens": ("inputs", "vision prefill"),
    "all_logits": ("layers", "prefill logits"),
    "chunk_logits": ("schedules", "schedules"),
    "decode": ("decode", "decode steps"),
    "generate": ("decode", "generation"),
}
BROKEN = "tests.unit.oracle.broken_outputs"


def test_every_output_has_the_group_that_judges_it():
    assert set(JUDGED_BY) == set(OUTPUTS)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("output", OUTPUTS)
def test_each_output_broken_alone_fails_verify(output, dtype, tiny_model):
    group, stage = JUDGED_BY[output]
    options = VerifyOptions(dtype=dtype, port=f"{BROKEN}:Negated_{output}", groups=(group,), schedules_budget=60)
    result = verify(tiny_model, options)
    failed = sorted({row.stage for row in result.rows if row.failed})
    assert failed == [stage], f"{output} broken in {dtype}: {result.verdict.summary()}"


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
