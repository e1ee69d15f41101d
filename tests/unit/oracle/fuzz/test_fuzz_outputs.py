"""Whatever ``verify`` judges of a port's outputs, the fuzzer judges too: each output a port returns
(every ``PortPrefill`` field, ``decode``'s logits, ``generate``'s tokens) broken alone in a port that is
otherwise this runtime is a divergence the fuzzer finds, named for that output; one NaN in any of
them, a padded position included, too; and the logits at every position but the last 32 off (a bug
another engine shipped) are found. The unbroken runtime passes the same examples with every stage
output compared (``test_runtime_state_machine.py``)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
import torch

from gemma4_static.oracle.checks.finite import (
    PREFILL_FIELDS,
    count_non_finite,
    finite_row,
    non_finite,
    returned_tensors,
)
from gemma4_static.oracle.fuzz import FuzzTarget, fuzz
from gemma4_static.oracle.fuzz.stages import STAGE_FIELDS, stage_rows
from gemma4_static.oracle.groups.layers import FINITE, finite_rows
from gemma4_static.oracle.options import VerifyOptions
from gemma4_static.oracle.references.samples import image_prompt
from gemma4_static.ports import Gemma4Port, PortPrefill, PortSetup
from gemma4_static.ports.static import StaticRuntimePort
from tests.unit.oracle import broken_outputs
from tests.unit.oracle.broken_outputs import FIELDS, OUTPUTS, UNJUDGED
from tests.unit.test_runtime_state_machine import SECOND_IMAGE, image_prompts

MAX_SEQ = 16
EXAMPLES = 12  # each output below is found within 4 examples from seed 0
NON_FINITE = "the port returned NaN or infinity"
# what the fuzzer's message names for each broken output (its row, or the divergence it caused)
NAMED = {
    "logits": "last prompt token",
    "all_logits": "every position",
    "chunk_logits": "end of chunk",
    "hidden_states": "decoder layers",
    "per_layer_inputs": "PLE",
    "soft_tokens": "vision prefill",
    "decode": "decode step",
    "generate": "greedy generation",
}


def test_the_list_names_every_field():
    assert {field.name for field in dataclasses.fields(PortPrefill)} == set(FIELDS) | set(UNJUDGED)
    assert set(NAMED) == set(OUTPUTS) and set(STAGE_FIELDS) < set(FIELDS) == set(PREFILL_FIELDS)


def target_of(port: type, model, *, images: bool = False) -> tuple[FuzzTarget, object]:
    """The fuzz target of ``port`` on ``model`` (with two image slots and image prompts where ``images``)."""
    if not images:
        return FuzzTarget.of(model, VerifyOptions(max_seq=MAX_SEQ), build=lambda setup: port(model, setup)), None
    layout = image_prompt(model.config, text_after=[3, 3], seed=1, then=SECOND_IMAGE)
    base = FuzzTarget.of(model, VerifyOptions(max_seq=layout.input_ids.shape[1] + 8), build=lambda s: port(model, s))
    return dataclasses.replace(base, image_slots=layout.image_slots), image_prompts(model)


CASES = [("Negated", output) for output in OUTPUTS] + [("NonFinite", output) for output in (*FIELDS, "decode")]
IMAGES = "soft_tokens"  # returned only for prompts with images: the fuzzer's image kind, about 25 s a case


PARAMS = [
    pytest.param(damage, output, marks=[pytest.mark.self_test] if output == IMAGES else [], id=f"{damage}-{output}")
    for damage, output in CASES
]


@pytest.mark.parametrize(("damage", "output"), PARAMS)
def test_each_output_broken_alone_is_a_divergence_the_fuzzer_finds(damage, output, tiny_model):
    port = getattr(broken_outputs, f"{damage}_{output}")
    target, images = target_of(port, tiny_model, images=output == IMAGES)
    result = fuzz(target, max_examples=EXAMPLES, seed=0, shrink=False, images=images)
    assert result.failure is not None, f"{damage} {output} passed {result.examples} examples: {result.coverage}"
    assert (NON_FINITE if damage == "NonFinite" else NAMED[output]) in result.failure, result.failure


def test_soft_tokens_broken_alone_fail_their_stage_row(tiny_model):
    """The default suite's twin of the image cases above: the fuzzer's judgement of a prefill's soft
    tokens, on one prefill of two image rows (one image each) through this runtime."""
    prompt = image_prompt(tiny_model.config, text_after=[3, 1], seed=1)
    port = StaticRuntimePort(tiny_model, PortSetup(prompt.input_ids.shape[1], 2, prompt.image_slots))
    result = port.prefill(prompt, keep_intermediates=True)
    rows = stage_rows(tiny_model, None, result, prompt, prompt)
    assert rows and not any(row.failed for row in rows), [row for row in rows if row.failed]
    assert {row.stage for row in rows} == {"decoder layers", "PLE", "vision prefill"}
    broken = dataclasses.replace(result, soft_tokens=broken_outputs.negated(result.soft_tokens))
    (failed,) = [row for row in stage_rows(tiny_model, None, broken, prompt, prompt) if row.failed]
    assert failed.stage == "vision prefill" and failed.value > 100 * failed.tolerance, failed
    alone = {"hidden_states": "decoder layers", "per_layer_inputs": "PLE", "soft_tokens": "vision prefill"}
    for field, stage in alone.items():  # each judged when it is the only one returned
        only = PortPrefill(result.logits, **{field: getattr(result, field)})
        assert {row.stage for row in stage_rows(tiny_model, None, only, prompt, prompt)} == {stage}, field
    assert stage_rows(tiny_model, None, PortPrefill(result.logits), prompt, prompt) == []


def test_logits_wrong_at_every_position_but_the_last_are_found(tiny_model):
    target, _ = target_of(broken_outputs.AllButLast, tiny_model)
    result = fuzz(target, max_examples=EXAMPLES, seed=0, shrink=False)
    assert result.failure is not None and "(every position): 32" in result.failure, result.failure


def test_a_non_finite_value_is_named_with_its_output_and_count():
    chunks = (torch.zeros(2, 4), torch.zeros(2, 4))
    result = PortPrefill(torch.zeros(2, 4), all_logits=torch.zeros(2, 3, 4), chunk_logits=chunks)
    assert non_finite(returned_tensors(result)) is None
    assert finite_row("prefill logits", "every value", returned_tensors(result)).status == "PASS"
    result.chunk_logits[1][0, 2] = float("inf")
    result.all_logits[1, 2, :2] = float("nan")
    assert non_finite(returned_tensors(result)) == "all_logits holds 2 values that are NaN or infinite (of 24)"
    row = finite_row("prefill logits", "every value", returned_tensors(result))
    assert row.value == 3 and row.failed and row.detail.startswith("all_logits holds 2")
    assert count_non_finite(torch.tensor([1, 2])) == 0  # token ids: integers, finite by construction
    names = [name for name, _ in returned_tensors(result)]
    assert names == ["logits", "all_logits", "chunk_logits[0]", "chunk_logits[1]"]


class FailingPort(Gemma4Port):
    def prefill(self, prompt, *, keep_intermediates=False):
        raise RuntimeError("its prefill failed")


class PrefillRaised:
    """A session whose port raised on the sample prompt's prefill (its error again on each read, as
    the session keeps it)."""

    @property
    def ours(self):
        try:
            FailingPort().prefill(None)
        except RuntimeError as error:
            raise error from None


def test_the_layers_groups_finite_row_counts_and_names_what_the_port_returned():
    (row,) = finite_rows(SimpleNamespace(ours=PortPrefill(torch.zeros(1, 4), all_logits=torch.zeros(1, 2, 4))))
    assert (row.stage, row.check, row.metric, row.value, row.status) == (
        "prefill logits", FINITE, "non-finite values", 0, "PASS"
    )  # fmt: skip
    (raised,) = finite_rows(PrefillRaised())
    assert (raised.stage, raised.check, raised.failed) == ("prefill logits", f"{FINITE}: the port raised", True)
    assert "its prefill failed" in raised.detail
