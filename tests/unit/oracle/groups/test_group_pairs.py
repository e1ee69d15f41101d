"""Every check group of ``verify``, judged against a designed faulty port or input and against the
same without the fault: the faulty run's failing rows are exactly the stage the group judges, the
first of them named with its figure; the correct run passes that group with something compared
(an ungated group: the same row, its measured value telling the two apart). A group in ``GROUPS``
without a pair here fails :func:`test_every_group_has_a_pair`.

The faults come from the self-test's catalogues (``oracle/faults``): a wrapper port breaking one
host-side stage, a port-shaped fault, a catalogued porting bug injected into this runtime, a scheme
fault of a calibrated port, a model made to overflow. Figures are those of the tiny models on any
CPU: counts exactly, errors within 1% (each fault moves its figure by orders of magnitude)."""

from __future__ import annotations

import contextlib
import functools
import math
from dataclasses import dataclass, field, replace
from types import SimpleNamespace

import pytest
import torch

from gemma4_static.circle.graphs import circle_missing
from gemma4_static.oracle.checks.routing import RoutingLedger
from gemma4_static.oracle.faults.catalogue import faults_named
from gemma4_static.oracle.flow.verify import verify
from gemma4_static.oracle.groups import BY_NAME, names
from gemma4_static.oracle.groups.decode import SPECIAL_KINDS, with_special_ids
from gemma4_static.oracle.options import VerifyOptions
from gemma4_static.oracle.references import models
from gemma4_static.oracle.references.samples import special_ids, text_prompt
from gemma4_static.oracle.results.report import Row
from gemma4_static.ports import PortSetup
from gemma4_static.ports.static import StaticRuntimePort
from tests import made_models

pytestmark = [
    pytest.mark.xdist_group("verify-tiny"),  # one worker: the correct runs, and HF's answers with the verify command's
    pytest.mark.usefixtures("hf_answers_kept"),  # HF asked each question once (faulty and correct runs share it)
]
HOST = "gemma4_static.oracle.faults.host_faults"
PORTS = "gemma4_static.oracle.faults.port_faults"
SCHEME = "gemma4_static.oracle.faults.static_faults"
OWN = "tests.unit.oracle.groups.own_flow_ports"
CIRCLE = "tests.unit.oracle.groups.circle_ports"


@dataclass(frozen=True)
class Case:
    """One run's conditions: the port, a catalogued fault injected into this runtime, the model (a
    name, or ``overflowing``: tiny with layer 3's up projection scaled by 1e6), options of the run."""

    port: str = "gemma4-static"
    fault: str = ""
    model: str = "tiny"
    options: tuple[tuple[str, object], ...] = ()


@dataclass(frozen=True)
class Pair:
    """A group's pair: the faulty case, the stage its failing rows are of, the first failing row's
    check (its start) and figure; the correct case (its run shared with the other groups'); the
    groups a run needs before this one (a group reading what the others ran)."""

    faulty: Case
    stage: str
    first: str
    figure: float
    correct: Case
    before: tuple[str, ...] = field(default=())


WRAPPED = Case(f"{HOST}:HostStagesPort")
RUNTIME = Case()
A8W8 = (("quant", "a8w8"),)
FLOAT16 = (("dtype", torch.float16),)
GRID = (("schedules_budget", 60),)
PAIRS = {
    "quantization": Pair(
        Case(f"{SCHEME}:ZeroPointDropped", options=A8W8),
        "quantization",
        "83 of its 83 calibrated ranges vs HF's [worst: layer 1 ple_p",
        52.22,
        Case(f"{SCHEME}:StaticSchemePort", options=A8W8),
    ),
    "inputs": Pair(Case(f"{HOST}:PaddingWithEos"), "static inputs", "sample prompt: ids", 38, WRAPPED),
    "prefill-masks": Pair(
        Case(fault="padding-keys-visible"), "masks prefill", "full_attention eager (24 layouts)", 300, RUNTIME
    ),
    "decode-masks": Pair(
        Case(f"{HOST}:DecodeWindowWide"),
        "masks decode",
        "sliding_attention eager (positions [1, 5, 6, 7, 15])",
        18,
        WRAPPED,
    ),
    "chunk-masks": Pair(
        Case(fault="sliding-window-off-by-one"),
        "masks chunk",
        "sliding_attention eager, chunks of [5, 6, 7]",
        81,
        RUNTIME,
    ),
    "vision-masks": Pair(Case(fault="image-tokens-causal"), "masks vision", "sliding_attention eager", 72, RUNTIME),
    "rope": Pair(
        Case(f"{HOST}:DecodeRopeNextPosition"),
        "RoPE decode",
        "full_attention float32 (positions [1, 5",
        0.9564,
        WRAPPED,
    ),
    "mask-value": Pair(Case(f"{HOST}:MaskValueMinusOne"), "mask value", "-1 over 25 keys", 8.414e10, WRAPPED),
    "layers": Pair(Case(f"{HOST}:AllLogitsShifted"), "prefill logits", "every valid position", 42.68, WRAPPED),
    "chunked-prefill": Pair(
        Case(f"{HOST}:CacheOnePositionBehind"), "chunked prefill", "chunks of 7, K/V of every row", 1.967, WRAPPED
    ),
    "decode": Pair(
        Case(f"{HOST}:PlaceholdersUnmappedInDecode"), "decode steps", "each of 3 placeholders fed", 34.32, WRAPPED
    ),
    "schedules": Pair(  # 60 port calls reach the ring's wraps on tiny (the whole grid: about 5 s a run)
        Case(f"{PORTS}:RingWrapCounter", options=GRID),
        "schedules",
        "prompt 20: 1 schedule",
        33.28,
        Case(f"{PORTS}:WrappedRuntimePort", options=GRID),
    ),
    "long-positions": Pair(
        Case(f"{PORTS}:RopePositionsInHalf"), "long positions", "prompt 4098", 22.0, Case(f"{PORTS}:WrappedRuntimePort")
    ),
    "routing": Pair(
        Case(fault="router-ties-reversed", model="hf-tester"),
        "routing",
        "top-k of 46 token choices vs HF, HF margin > 0.0001",
        8,
        Case(model="hf-tester"),
    ),
    "overflow": Pair(
        Case(model="overflowing", options=FLOAT16),
        "overflow",
        "layer 3 [first: layer 3 up_proj",
        math.inf,  # beyond float16: as far as it gets
        Case(options=FLOAT16),
    ),
    "export": Pair(
        Case(f"{HOST}:ExportMutatesItsInput"),
        "export round-trip",
        "16 graphs, exported vs eager [first: cache update",
        1.0,
        WRAPPED,
    ),
    "circle": Pair(
        Case(f"{CIRCLE}:CircleMaskSqueezed"),
        "circle round-trip",
        "attention as shipped",
        math.inf,  # a malformed graph: onert returns another shape (or refuses it, or crashes)
        Case(f"{CIRCLE}:CircleAttention"),
    ),
    "own-checks": Pair(
        Case(f"{OWN}:PassesItselfAllLogitsShifted"),
        "own checks",
        "prefill:",
        1,
        Case(f"{OWN}:PassesItself"),
        before=("layers",),
    ),
}
UNGATED = ("own-checks",)  # measured, never gated: the row's value tells the pair apart
NEEDS_EXTRA = {"circle": circle_missing()}  # a group that compares nothing without an extra (it SKIPs)
GROUP_PARAMS = [
    pytest.param(name, marks=pytest.mark.skipif(bool(NEEDS_EXTRA.get(name)), reason=f"needs {NEEDS_EXTRA.get(name)}"))
    for name in names()
]


@pytest.fixture(scope="module")
def model_of(tiny_model):
    """The model a case names: the suite's tiny model, HF's tester, or tiny made to overflow."""

    @functools.cache
    def built(name: str):
        if name == "tiny":
            return tiny_model
        if name == "hf-tester":
            return models.build_default_model(name)
        return made_models.overflowing(tiny_model)

    return built


def run(case: Case, groups: tuple[str, ...], model) -> list[Row]:
    """The rows of ``verify`` of ``case`` on ``model`` over ``groups`` (its catalogued fault injected
    while it runs). HF's tester (a mixture of experts holding 512 positions, fewer than the sample
    prompt needs): the routing group's rows over this runtime's prefill of two rows and HF's forward."""
    injected = faults_named([case.fault])[0].injected() if case.fault else contextlib.nullcontext()
    if case.model == "hf-tester":
        prompt, ledger = text_prompt(model.config, [12, 9]), RoutingLedger()
        with ledger.active(model), torch.no_grad():
            with injected:
                StaticRuntimePort(model, PortSetup(16, 2)).prefill(prompt)
            model(**prompt.hf_kwargs())
        return [replace(row, group="routing") for row in BY_NAME["routing"].rows(SimpleNamespace(routing=ledger))]
    with injected:
        return verify(model, VerifyOptions(port=case.port, groups=groups, **dict(case.options))).rows


@pytest.fixture(scope="module")
def correct_run(model_of):
    """One run per correct case over every group it is the correct side of (with the groups they
    need before), shared by those groups' tests."""

    @functools.cache
    def rows(case: Case) -> list[Row]:
        wanted = {group for group, pair in PAIRS.items() if pair.correct == case}
        wanted |= {before for group in wanted for before in PAIRS[group].before}
        return run(case, tuple(group for group in names() if group in wanted), model_of(case.model))

    return rows


def test_every_group_has_a_pair():
    assert set(PAIRS) == set(names()), sorted(set(names()) ^ set(PAIRS))


@pytest.mark.parametrize("group", GROUP_PARAMS)
def test_a_faulty_port_fails_exactly_its_groups_row(group, model_of):
    pair = PAIRS[group]
    rows = [row for row in run(pair.faulty, (*pair.before, group), model_of(pair.faulty.model)) if row.group == group]
    if group in UNGATED:
        (row,) = rows
        assert row.status == "INFO" and row.check.startswith(pair.first) and row.value == pair.figure, row
        return
    failed = [row for row in rows if row.failed]
    assert failed and {row.stage for row in failed} == {pair.stage}, [(row.stage, row.check) for row in failed]
    assert failed[0].check.startswith(pair.first), failed[0].check
    assert failed[0].value == pytest.approx(pair.figure, rel=0.01) and not failed[0].within, failed[0]


@pytest.mark.parametrize("group", GROUP_PARAMS)
def test_the_same_without_the_fault_passes_its_group(group, correct_run):
    pair = PAIRS[group]
    rows = [row for row in correct_run(pair.correct) if row.group == group]
    assert rows and not any(row.failed for row in rows), [row for row in rows if row.failed]
    if group in UNGATED:
        (row,) = rows
        assert row.status == "INFO" and row.check.startswith(pair.first) and row.value == 0, row
    else:
        assert any(row.compared for row in rows), rows


def test_the_decode_group_feeds_every_kind_of_special_id(correct_run):
    """One row per kind of special id fed as decode inputs (a kind spelt otherwise in one place would
    feed none, silently), each compared and passing; a kind the group does not know is an error."""
    rows = [row for row in correct_run(WRAPPED) if row.group == "decode" and "fed as a decode input" in row.check]
    fed = {row.check.split(" ", 3)[3].split(" fed")[0] for row in rows}
    assert fed == set(SPECIAL_KINDS.values()) and all(row.compared and not row.failed for row in rows), rows
    with pytest.raises(ValueError, match="kind must be one of \\('other', 'placeholder'\\), got 'placeholders'"):
        with_special_ids(SimpleNamespace(config=None), "placeholders")


def test_the_special_ids_at_a_prompts_end_are_named_as_the_config_names_them(correct_run, tiny_model):
    """The prefill rows of special ids at a prompt's end list each id by its config field less
    ``_token_id`` (``boi``, ``audio``; HF's ``eoa_token_index`` as it is), the name a reader looks
    up; every special id but the image placeholder (an image is its own group's), each once."""
    rows = [row for row in correct_run(WRAPPED) if row.group == "decode" and "at a prompt's end" in row.check]
    named = [name for row in rows for name in row.check.split("(", 1)[1].rstrip(")").split(", ")]
    fields = [field for field in special_ids(tiny_model.config) if field != "image_token_id"]
    expected = [field[: -len("_token_id")] if field.endswith("_token_id") else field for field in fields]
    assert len(rows) == len(SPECIAL_KINDS) and sorted(named) == sorted(expected), (named, fields)
