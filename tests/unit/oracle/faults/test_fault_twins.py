"""A default-suite twin of the fault self-test (``--gemma4-self-test`` runs each fault through every
check group): each catalogued fault that shows on the tiny model in float32 is injected and run
against the one check group that catches it first there, which must catch it by a comparison
(a patch that makes the port raise instead is not the bug it describes, unless the fault says it
raises). About 5 s of one worker for 29 faults; the lane keeps the whole flow and the faults below
that need another model, profile or the whole grid."""

from __future__ import annotations

import pytest

from gemma4_static.oracle.faults.catalogue import CATALOGUE, faults_named
from gemma4_static.oracle.faults.self_test import format_result, run_fault
from gemma4_static.oracle.options import VerifyOptions

# the group that catches each fault first on the tiny model in float32 (the self-test lane's finding)
CAUGHT_BY = {
    "sliding-window-off-by-one": "prefill-masks",
    "sliding-window-ignored": "prefill-masks",
    "padding-keys-visible": "prefill-masks",
    "image-tokens-causal": "vision-masks",
    "sliding-rope-theta-of-full": "rope",
    "proportional-rope-as-default": "rope",
    "partial-rope-neox-exponents": "rope",
    "rope-positions-from-one": "rope",
    "rope-angles-in-low-precision": "rope",
    "chunk-written-before-attending": "chunked-prefill",
    "ring-slot-off-by-one": "chunked-prefill",
    "shared-kv-first-producer": "layers",
    "shared-kv-reads-the-ring": "layers",
    "final-softcap-missing": "layers",
    "layer-scalar-missing": "layers",
    "attention-scaled-by-head-dim": "layers",
    "gelu-erf": "layers",
    "embedding-unscaled": "inputs",
    "placeholders-reach-ple": "inputs",
    "v-norm-missing": "layers",
    "q-norm-after-rope": "layers",
    "k-norm-weight-dropped": "layers",
    "mask-value-minus-one": "mask-value",
    "key-span-one-short": "decode",
    "vision-rope-axes-swapped": "inputs",
    "vision-position-table-swapped": "inputs",
    "vision-pooling-transposed": "inputs",
    "vision-clamps-dropped": "inputs",
    "images-slot-by-slot": "inputs",
}
LANE_ONLY = {  # the self-test lane's alone, and why
    "kept-masks-not-reopened": "caught by the schedules grid, about 5 s a run",
    "k-cache-as-v": "needs K = V layers: the 26B-A4B geometry",
    "global-kv-heads-of-sliding": "needs K = V layers: the 26B-A4B geometry",
    "decode-kv-heads-tiled": "needs K/V heads each serving several query heads: the 26B-A4B geometry's full layers "
    "(the runtime's side pinned by test_decode_parity.py on that geometry)",
    "router-softmax-bf16": "needs mixture-of-experts blocks: the 26B-A4B geometry",
    "router-ties-reversed": "needs mixture-of-experts blocks: the 26B-A4B geometry",
    "quant-zero-point-dropped": "a fault of the fake quantization: an integer profile",
    "quant-groups-down-columns": "a fault of the fake quantization: an integer profile",
    "quant-range-from-wrong-site": "a fault of the fake quantization: an integer profile",
}

pytestmark = pytest.mark.usefixtures("hf_answers_kept")  # HF asked each question once (the faults share it)


def test_every_fault_has_a_twin_or_says_why_not():
    names = [fault.name for fault in CATALOGUE]
    assert sorted(names) == sorted([*CAUGHT_BY, *LANE_ONLY]) and not set(CAUGHT_BY) & set(LANE_ONLY)


@pytest.mark.parametrize(("name", "group"), CAUGHT_BY.items(), ids=list(CAUGHT_BY))
def test_each_fault_is_caught_by_its_group(name, group, tiny_model):
    (fault,) = faults_named([name])
    result = run_fault(fault, tiny_model, VerifyOptions(groups=(group,)))
    assert result.caught and result.failed[0].group == group, format_result(result)
