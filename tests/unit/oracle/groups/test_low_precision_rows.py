"""The ``layers`` and ``decode`` groups in a low-precision profile, on the tiny model in bfloat16
(about a second; the numerics lane runs them on the E2B geometry with more steps): each row under
its check, the token rules over the positions and steps they name, a port's generation asked of
the sample prompt, all passing on this runtime; a port whose greedy tokens leave float64's fails
the generation row by its decided divergences."""

from __future__ import annotations

import jsonschema
import pytest
import torch

from gemma4_static.oracle.flow.verify import verify
from gemma4_static.oracle.options import VerifyOptions
from gemma4_static.oracle.results.report_json import schema
from gemma4_static.oracle.session.sample_plan import sample_prompt
from gemma4_static.ports.static import StaticRuntimePort
from tests.unit.ports.port_adapters import WrappedWithImages

STEPS = 3
SQNR_ROWS = ("SQNR dB", "cosine", "max abs error", "PEIR")  # a metric row each, against float64
ONE_RUN = pytest.mark.xdist_group("bf16-run")  # the tests of the one bfloat16 run on one worker (1 s a run)


@pytest.fixture(scope="module")
def bf16_run(tiny_model):
    groups = ("layers", "chunked-prefill", "decode")
    return verify(tiny_model, VerifyOptions(dtype=torch.bfloat16, groups=groups, steps=STEPS))


@pytest.fixture(scope="module")
def bf16_rows(bf16_run):
    return bf16_run.rows


def _checks(rows, stage: str) -> list[tuple[str, str]]:
    return [(row.check, row.metric) for row in rows if row.stage == stage]


@ONE_RUN
def test_each_low_precision_row_is_under_its_check_and_passes(bf16_rows):
    assert {row.status for row in bf16_rows} == {"PASS", "INFO"}
    layers = [f"layers {start}-{start + 4} hidden states" for start in (0, 5)]
    assert _checks(bf16_rows, "decoder layers") == [(check, metric) for check in layers for metric in SQNR_ROWS]
    last = ("last valid token per row", "last valid token per row, plain prefill")
    assert _checks(bf16_rows, "prefill logits")[:8] == [(check, metric) for check in last for metric in SQNR_ROWS]
    decode = _checks(bf16_rows, "decode steps")
    batch = 2
    steps = f"{batch} rows x {STEPS} steps"
    assert decode[:4] == [(steps, metric) for metric in SQNR_ROWS]
    assert decode[4] == (steps, "margin shift (ulps)") and all(check.startswith(steps) for check, _ in decode)
    assert [metric for _, metric in decode[5:]] == [
        "top-1 disagreements",
        "tied at this precision",
        "top-5 tokens missed",
    ]
    generation = f"{batch} rows x {STEPS} greedy tokens vs float64 generate"
    assert {check.split(",")[0] for check, _ in _checks(bf16_rows, "generation")} == {generation}
    (matched,) = [row for row in bf16_rows if row.metric == "matched prefix"]
    assert matched.value == STEPS  # every token of the port's generation compared
    chunked = [row for row in bf16_rows if row.group == "chunked-prefill"]
    assert chunked and {row.stage for row in chunked} == {"chunked prefill"}
    cache = [(f"{kind} of every producing layer and row", metric) for kind in ("K", "V") for metric in SQNR_ROWS]
    assert _checks(bf16_rows, "KV cache") == cache  # each kind of the cache its own rows, under its check
    assert [pair for pair in _checks(bf16_rows, "chunked prefill") if "producing" in pair[0]] == [
        (f"chunks of 7, {check}", metric) for check, metric in cache
    ]


@ONE_RUN
def test_the_per_layer_plot_holds_each_layers_own_figures_against_float64(bf16_run):
    """The report's per-layer plot: layer by layer (10), a point per metric (SQNR and cosine gated,
    the other two measured) with HF's figure beside, where the rows merge five layers into their
    worst: the worst of a span is its merged row's value."""
    points = bf16_run.figures["layers"]
    assert [(point["layer"], point["metric"]) for point in points] == [
        (layer, metric) for layer in range(10) for metric in SQNR_ROWS
    ]
    (merged,) = [row for row in bf16_run.rows if row.check == "layers 0-4 hidden states" and row.metric == "SQNR dB"]
    assert min(point["value"] for point in points[: 5 * len(SQNR_ROWS)] if point["metric"] == "SQNR dB") == merged.value
    statuses = {metric: {point["status"] for point in points if point["metric"] == metric} for metric in SQNR_ROWS}
    assert statuses == {"SQNR dB": {"PASS"}, "cosine": {"PASS"}, "max abs error": {"INFO"}, "PEIR": {"INFO"}}
    assert all(point["hf"] is not None for point in points)  # HF in bfloat16 beside each


@ONE_RUN
def test_every_row_is_a_row_of_the_reports_schema(bf16_rows):
    """As ``verify --json`` writes it: the rows only a low-precision profile has (the margins, the
    token rule, the sample's top-2 gaps) included."""
    validator = jsonschema.Draft202012Validator({"$defs": schema()["$defs"], "$ref": "#/$defs/row"})
    for row in bf16_rows:
        validator.validate(row.as_dict())
    (gaps,) = [row for row in bf16_rows if row.metric.startswith("smallest gap")]
    assert gaps.higher_is_better and gaps.status == "INFO"  # a wider gap is better; reported, not gated


@ONE_RUN
def test_the_token_rule_names_every_valid_position_it_counted(bf16_rows, tiny_model):
    valid = int(sample_prompt(tiny_model.config, StaticRuntimePort.limits).attention_mask.sum())
    token_rows = [row for row in bf16_rows if row.stage == "prefill logits" and "valid position" in row.check]
    assert {row.check.split(",")[0] for row in token_rows} == {f"every valid position ({valid})"}
    assert [row.metric for row in token_rows] == [
        "margin shift (ulps)",
        "top-1 disagreements",
        "tied at this precision",
        "top-5 tokens missed",
    ]


class ShiftedGeneration(StaticRuntimePort):
    """Generates every token one id above the runtime's (a greedy loop reading the wrong logit)."""

    def generate(self, prompt, **kwargs):
        return super().generate(prompt, **kwargs) + 1


def test_a_port_leaving_float64s_greedy_tokens_fails_the_generation_row(tiny_model):
    options = VerifyOptions(port=f"{__name__}:ShiftedGeneration", dtype=torch.bfloat16, groups=("decode",), steps=STEPS)
    rows = verify(tiny_model, options).rows
    failed = [(row.stage, row.metric) for row in rows if row.status == "FAIL"]
    assert failed == [("generation", "decided divergences")]


def test_the_image_stages_a_port_does_not_expose_are_skip_rows_under_their_checks(tiny_model):
    port = "tests.unit.ports.port_adapters:WrappedWithImages"
    options = VerifyOptions(port=port, dtype=torch.bfloat16, groups=("inputs",))
    skipped = [(row.stage, row.check, row.skipped) for row in verify(tiny_model, options).rows if row.status == "SKIP"]
    assert skipped[-3:] == [
        ("PLE", "vs float64", "wrapped with images does not expose per-layer inputs"),
        ("vision prefill", "soft tokens", "wrapped with images does not expose soft tokens"),
        (
            "fusion",
            "vs masked_scatter",
            "wrapped with images is another port: a check of this project's runtime internals",
        ),
    ]


def test_each_input_stage_is_measured_against_float64_under_its_check(tiny_model):
    """This runtime's ``inputs`` group in bfloat16: every stage it exposes, under the check that names
    what it is compared with (the static inputs and the fusion exactly, the rest against float64)."""
    rows = verify(tiny_model, VerifyOptions(dtype=torch.bfloat16, groups=("inputs",))).rows
    assert {row.status for row in rows} == {"PASS", "INFO"}
    measured = {(row.stage, row.check) for row in rows if row.metric in SQNR_ROWS}
    assert measured == {("token embedding", "vs float64"), ("PLE", "vs float64"), ("vision prefill", "soft tokens")}
    assert all([row.metric for row in rows if (row.stage, row.check) == case] == list(SQNR_ROWS) for case in measured)


def test_a_port_without_its_cache_is_a_skip_row_of_each_kv_comparison_in_bfloat16(tiny_model):
    port = "tests.unit.ports.port_adapters:WrappedWithImages"
    options = VerifyOptions(port=port, dtype=torch.bfloat16, groups=("layers", "chunked-prefill"))
    skipped = [(row.stage, row.check, row.skipped) for row in verify(tiny_model, options).rows if row.status == "SKIP"]
    said = "wrapped with images does not expose its KV cache"
    assert ("KV cache", "K/V of every producing layer", said) in skipped
    assert ("chunked prefill", "chunks of 7, K/V of every producing layer", said) in skipped


EMBEDDED: list[torch.Tensor] = []  # the ids each token_embedding call was given


class EmbeddingRecorder(WrappedWithImages):
    """This runtime with images, recording the ids its token embedding is asked for."""

    def token_embedding(self, input_ids: torch.Tensor) -> torch.Tensor:
        EMBEDDED.append(input_ids.clone())
        return super().token_embedding(input_ids)


class EmbeddingRaises(WrappedWithImages):
    """This runtime with images, its token embedding raising."""

    def token_embedding(self, input_ids: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("no token embedding today")


def test_a_token_embedding_that_raises_is_one_fail_row_under_its_check_in_bfloat16(tiny_model):
    options = VerifyOptions(port=f"{__name__}:EmbeddingRaises", dtype=torch.bfloat16, groups=("inputs",))
    failed = [row for row in verify(tiny_model, options).rows if row.failed]
    assert [(row.stage, row.check) for row in failed] == [("token embedding", "vs float64: the port raised")]
    assert "no token embedding today" in failed[0].raised


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_token_embedding_is_asked_for_the_ids_hfs_language_model_looks_up(tiny_model, dtype):
    """An image's placeholders are the pad id there (HF's placeholder mask), in every profile."""
    EMBEDDED.clear()
    rows = verify(tiny_model, VerifyOptions(port=f"{__name__}:EmbeddingRecorder", dtype=dtype, groups=("inputs",))).rows
    assert rows and not any(row.failed for row in rows)
    placeholder, pad = tiny_model.config.image_token_id, tiny_model.config.get_text_config().pad_token_id
    assert EMBEDDED and all(not (ids == placeholder).any() for ids in EMBEDDED)
    assert any((ids == pad).sum() > 8 for ids in EMBEDDED)  # an image's tokens, each the pad id
