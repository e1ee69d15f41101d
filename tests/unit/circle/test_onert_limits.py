"""onert's limits, each on a module of a line or two converted by TICO as it ships (no rewrite): the
graph holds the limit where :func:`found_limits` says, onert refuses it (in a child process), and the
graph worked around in its file (:func:`worked_around`) matches the module to float32 rounding. The
as-shipped, executed and fixed rows of :func:`shipped_rows` on the same modules. TICO's own graphs:
``tests/unit/ports/adapters/tico/test_circle_graphs.py`` (ports lane)."""

from __future__ import annotations

import inspect
import math

import pytest
import torch
import torch.nn.functional as F

from gemma4_static.circle import graphs
from gemma4_static.circle.graphs import circle_missing, convert
from gemma4_static.circle.isolated import OnertRefused, run_isolated
from gemma4_static.circle.onert_limits import (
    CONST_LHS_BMM,
    CONVERSION_OPTIONS,
    FC_KEEP_DIMS,
    LIMITS,
    RANK2_RMS_NORM,
    READ_OUTPUT,
    found_limits,
    worked_around,
)
from gemma4_static.export import StageCase
from gemma4_static.oracle.checks.circle import (
    STAGE,
    SYMPTOMS,
    TICO_FIX,
    circle_rows,
    conversion_rows,
    positional,
    shipped_rows,
)
from tests.unit.oracle.groups.circle_ports import masked_attention_case

pytestmark = pytest.mark.skipif(circle_missing() is not None, reason=f"Circle graphs need {circle_missing()}")
ROUNDING = 1e-6  # float32 rounding of sums of 8 terms of order 1


class Norm(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.linspace(0.5, 1.5, 8))

    def forward(self, x):  # (N, 8): a rank-2 RMS_NORM
        return F.rms_norm(x, (8,), self.weight, 1e-6)


class ConstantLeft(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.left = torch.nn.Parameter(torch.linspace(-1, 1, 32).reshape(1, 4, 8))

    def forward(self, x):  # (1, 8, 3): a BATCH_MATMUL whose left input is a constant
        return torch.matmul(self.left, x)


class Project(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(8, 4, bias=False)
        torch.nn.init.normal_(self.proj.weight, generator=torch.Generator().manual_seed(0))

    def forward(self, x):  # (B, S, 8): a rank-3 FULLY_CONNECTED keeping its dims
        return self.proj(x)


class ReadOutput(torch.nn.Module):
    def forward(self, x, past):  # the new row is an output and read by the concatenation
        row = (x * 2).reshape(1, 1, 4)
        return row, torch.cat([past, row], dim=1)


def _inputs(*shapes: tuple[int, ...]) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(0)
    return tuple(torch.randn(*shape, generator=generator) for shape in shapes)


def _error(module: torch.nn.Module, args: tuple, graph: bytes) -> float:
    with torch.no_grad():
        expected = module(*args)
    outputs = run_isolated(graph, list(args))
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert [tuple(output.shape) for output in outputs] == [tuple(tensor.shape) for tensor in expected]
    return max(float((output - tensor).abs().max()) for output, tensor in zip(outputs, expected, strict=True))


@pytest.mark.parametrize(
    ("module", "shapes", "limit", "operator", "refusal"),
    [
        (Norm(), [(5, 8)], RANK2_RMS_NORM, "RMS_NORM", "ShapeValidator failed"),
        (ConstantLeft(), [(1, 8, 3)], CONST_LHS_BMM, "BATCH_MATMUL", "OperationValidator failed"),
    ],
    ids=["rank-2 RMS_NORM", "constant left BATCH_MATMUL"],
)
def test_a_limit_is_found_refused_and_worked_around(module, shapes, limit, operator, refusal):
    args = _inputs(*shapes)
    graph = convert(module, args, label=limit, rewrites=False).buffer
    assert [(found.limit, found.index, found.operator) for found in found_limits(graph)] == [(limit, 0, operator)]
    with pytest.raises(OnertRefused, match=refusal):
        run_isolated(graph, list(args))
    if limit in CONVERSION_OPTIONS:  # worked around by TICO's option, then by the file's edits
        graph = convert(module, args, label=limit, rewrites=False, config=CONVERSION_OPTIONS[limit]).buffer
        assert [found.limit for found in found_limits(graph)] == [FC_KEEP_DIMS]
    assert _error(module, args, worked_around(graph)) <= ROUNDING


def test_an_output_read_by_an_operator_is_copied_to_the_output():
    module, args = ReadOutput(), _inputs((1, 4), (1, 3, 4))
    graph = convert(module, args, label="read output", rewrites=False).buffer
    assert [(found.limit, found.operator) for found in found_limits(graph)] == [(READ_OUTPUT, "CONCATENATION")]
    edited = worked_around(graph)
    assert found_limits(edited) == [] and _error(module, args, edited) == 0.0


def test_a_rank3_fully_connected_as_shipped_xfails_naming_the_limit_and_worked_around_passes():
    shipped, executed, fixed = shipped_rows([StageCase("project", Project().eval(), _inputs((2, 3, 8)))])
    assert shipped.status == "XFAIL" and shipped.value == math.inf and "(6, 4)" in shipped.check, shipped
    assert (
        shipped.expected
        == "onert 0.1.0's limits in this graph: FULLY_CONNECTED keep_num_dims (operator 0, FULLY_CONNECTED)"
    )
    assert executed.check == "project executed (onert's limits worked around: FULLY_CONNECTED keep_num_dims)"
    assert (
        fixed.check
        == f"project with TICO's fix (onert's limits worked around: FULLY_CONNECTED keep_num_dims; {TICO_FIX} disabled)"
    )
    with torch.no_grad():
        gate = 2e-5 * max(1.0, float(Project().eval()(*_inputs((2, 3, 8))).abs().max()))
    for row in (executed, fixed):
        assert row.stage == STAGE and row.status == "PASS" and row.value <= ROUNDING and row.tolerance == gate, row


def test_a_limit_explains_only_the_as_shipped_row():
    """The same limit found, a wrong value after the workaround fails (never XFAIL)."""
    rows = shipped_rows([StageCase("read", ReadOutput(), _inputs((1, 4), (1, 3, 4)))])
    assert [row.status for row in rows] == ["PASS", "PASS", "PASS"]


class Scatter(torch.nn.Module):
    def forward(self, cache, index, source):
        return cache.scatter(1, index, source)


def test_a_graph_tico_does_not_convert_is_one_fail_row():
    args = (torch.zeros(2, 6, 4), torch.tensor([[[1, 1, 1, 1]], [[3, 3, 3, 3]]]), torch.ones(2, 1, 4))
    (row,) = shipped_rows([StageCase("place", Scatter(), args)])
    assert row.status == "FAIL" and row.value == math.inf
    assert row.check.startswith("place: TICO does not convert it: NotYetSupportedError"), row.check


def test_keyword_arguments_are_bound_by_position_and_keyword_only_ones_refused():
    x = torch.ones(1, 8)
    assert positional(StageCase("project", Project(), (), {"x": x}))[0] is x

    class KeywordOnly(torch.nn.Module):
        def forward(self, *, x):
            return x

    with pytest.raises(ValueError, match=r"positional inputs only, got 'only' with keyword-only \['x'\]"):
        positional(StageCase("only", KeywordOnly(), (), {"x": x}))


def test_a_graph_that_crashes_onert_is_a_refusal_and_the_judge_lives_on():
    """Bytes that are no graph crash onert (a segmentation fault): in its child process, not this one."""
    with pytest.raises(OnertRefused, match=r"^onert crashed \(signal \d+\)$"):
        run_isolated(b"CIR0 not a graph", [torch.ones(1)])


def test_a_limit_worked_around_by_ticos_option_is_converted_with_it_and_named():
    shipped, executed, fixed = shipped_rows([StageCase("left", ConstantLeft(), _inputs((1, 8, 3)))])
    assert shipped.status == "XFAIL" and "OperationValidator failed" in shipped.check, shipped
    assert shipped.expected.endswith("BATCH_MATMUL constant left input (operator 0, BATCH_MATMUL)"), shipped
    named = "BATCH_MATMUL constant left input, TICO option convert_single_batch_lhs_const_bmm_to_fc"
    assert executed.check == f"left executed (onert's limits worked around: {named})"
    assert [executed.status, fixed.status] == ["PASS", "PASS"] and max(executed.value, fixed.value) <= ROUNDING


def test_ticos_reshape_pass_fails_the_shipped_and_executed_rows_and_its_fix_passes():
    """The attention of TICO's layers in three lines (its mask squeezed before the add): the graph as
    shipped is malformed, no onert limit explains it (FAIL, not XFAIL), the fix makes it right."""
    rows = shipped_rows([masked_attention_case(squeezed=True)])
    titles = ("attention as shipped", "attention executed", "attention with TICO's fix")
    # onert on the malformed graph: another shape, a refusal or a crash (undefined; each seen)
    assert [row.check.startswith(title) for row, title in zip(rows, titles, strict=True)] == [True] * 3, rows
    assert [row.status for row in rows] == ["FAIL", "FAIL", "PASS"], rows
    assert all(row.value == math.inf and row.expected == "" for row in rows[:2]) and rows[2].value <= ROUNDING


def test_a_limit_explains_only_a_failure_it_causes(monkeypatch):
    """The graph holds onert's keep_num_dims limit, but onert crashing on it is no symptom of that
    limit: the as-shipped row FAILs instead of XFAIL."""
    from gemma4_static.circle import isolated

    def crash(graph, tensors):
        raise OnertRefused("onert crashed (signal 11)")

    monkeypatch.setattr(isolated, "run_isolated", crash)
    shipped, *_ = shipped_rows([StageCase("project", Project().eval(), _inputs((2, 3, 8)))])
    assert (shipped.status, shipped.expected) == ("FAIL", ""), shipped
    assert shipped.check == "project as shipped: onert: onert crashed (signal 11)"


def test_every_limit_has_its_symptoms():
    """A limit without symptoms would never explain a failure (or, spelt otherwise, raise a KeyError)."""
    assert set(SYMPTOMS) == set(LIMITS) and all(SYMPTOMS.values())


class Double(torch.nn.Module):
    def forward(self, x):  # no limit of onert's
        return x * 2


class Add(torch.nn.Module):
    def forward(self, x, y):
        return x + y


class AddsInPlace(torch.nn.Module):
    def forward(self, cache, unused=None):  # writes into its input, as a cache update in place would
        return cache.add_(1.0)


class FailsItsExport(torch.nn.Module):
    def forward(self, x):  # runs eagerly; its export raises an error without a message (a bare assert's)
        if torch.compiler.is_exporting():
            raise AssertionError
        return x * 2


class Projections(torch.nn.Module):
    def __init__(self, count: int) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(8, 8, bias=False) for _ in range(count))

    def forward(self, x):  # (1, 3, 8): ``count`` rank-3 FULLY_CONNECTED keeping their dims
        for layer in self.layers:
            x = layer(x)
        return x


def _recorded(monkeypatch, refuse=lambda options: False) -> list[tuple]:
    """Each conversion the rows ask for (label, config, disabled passes, rewrites); ``refuse(options)``
    makes a conversion raise instead."""
    calls, original = [], graphs.convert

    def recording(module, args, **options):
        calls.append((options["label"], options.get("config"), options.get("disabled", ()), options["rewrites"]))
        if refuse(options):
            raise ValueError("refused on purpose")
        return original(module, args, **options)

    monkeypatch.setattr(graphs, "convert", recording)
    return calls


def test_each_conversion_is_of_the_module_as_shipped_labelled_with_its_row(monkeypatch):
    calls = _recorded(monkeypatch)
    shipped_rows([StageCase("left", ConstantLeft(), _inputs((1, 8, 3)))])
    option = CONVERSION_OPTIONS[CONST_LHS_BMM]
    assert calls == [
        ("left as shipped", None, (), False),
        ("left executed", option, (), False),
        ("left with TICO's fix", option, (TICO_FIX,), False),
    ]
    calls.clear()
    conversion_rows([StageCase("left", ConstantLeft(), _inputs((1, 8, 3)))], "a16w16t")
    assert calls == [("left a16w16t", None, (), False)]


def test_a_refused_conversion_fails_its_row_and_the_next_row_is_judged(monkeypatch):
    _recorded(monkeypatch, refuse=lambda options: bool(options.get("config")) and not options.get("disabled"))
    shipped, executed, fixed = shipped_rows([StageCase("left", ConstantLeft(), _inputs((1, 8, 3)))])
    named = "BATCH_MATMUL constant left input, TICO option convert_single_batch_lhs_const_bmm_to_fc"
    refusal = "TICO does not convert it: ValueError: refused on purpose"
    expected = f"left executed (onert's limits worked around: {named}): {refusal}"
    assert (executed.check, executed.status, executed.value) == (expected, "FAIL", math.inf)
    assert fixed.status == "PASS" and shipped.status == "XFAIL"


def test_a_graph_without_limits_says_so_and_wrong_values_fail_naming_the_output(monkeypatch):
    from gemma4_static.circle import isolated

    original = isolated.run_isolated
    monkeypatch.setattr(isolated, "run_isolated", lambda graph, tensors: [-out for out in original(graph, tensors)])
    rows = shipped_rows([StageCase("double", Double(), _inputs((1, 4)))])
    assert [row.check for row in rows] == [
        "double as shipped [first: double output 0]",
        "double executed (onert's limits worked around: none found) [first: double output 0]",
        f"double with TICO's fix (onert's limits worked around: none found; {TICO_FIX} disabled)"
        " [first: double output 0]",
    ]
    assert all(row.status == "FAIL" and row.expected == "" and row.value > 1 for row in rows)


def test_a_missing_output_fails_the_row_naming_the_counts(monkeypatch):
    from gemma4_static.circle import isolated

    monkeypatch.setattr(isolated, "run_isolated", lambda graph, tensors: [])
    shipped, *_ = shipped_rows([StageCase("double", Double(), _inputs((1, 4)))])
    assert shipped.check == "double as shipped [first: double: 0 outputs where the module returns 1]", shipped
    assert shipped.status == "FAIL"


def test_the_round_trips_rows_of_this_projects_graphs_are_its_stages():
    rows = circle_rows([StageCase("double", Double(), _inputs((1, 4)))])
    assert [(row.stage, row.check, row.status) for row in rows] == [(STAGE, "double output 0", "PASS")]


def test_a_graph_writing_into_its_input_is_judged_on_the_input_it_was_given():
    cache = torch.zeros(1, 4)
    rows = shipped_rows([StageCase("update", AddsInPlace(), (cache, None))])
    assert [row.status for row in rows] == ["PASS"] * 3 and torch.equal(cache, torch.zeros(1, 4)), rows


def test_a_failure_without_a_message_is_named_by_where_it_was_raised():
    line = inspect.getsourcelines(FailsItsExport.forward)[1] + 2
    where = f"AssertionError: raised at test_onert_limits.py:{line} (forward)"
    (row,) = shipped_rows([StageCase("asserts", FailsItsExport(), _inputs((2, 4)))])
    assert (row.check, row.status) == (f"asserts: TICO does not convert it: {where}", "FAIL")
    refused, converted = conversion_rows(
        [StageCase("asserts", FailsItsExport(), _inputs((2, 4))), StageCase("double", Double(), _inputs((1, 4)))],
        "a8w8",
    )
    assert (refused.check, refused.value, refused.status, refused.metric) == (
        f"asserts in a8w8: TICO does not convert it: {where}",
        0.0,
        "INFO",
        "converted",
    )
    assert (converted.check, converted.value, converted.status) == ("double in a8w8: converts as shipped", 1.0, "INFO")
    assert {refused.stage, converted.stage} == {STAGE} and converted.metric == "converted"


@pytest.mark.parametrize(("count", "more"), [(4, ""), (5, " and 1 more")])
def test_more_than_four_limits_are_named_four_and_counted(count, more):
    (shipped, *_) = shipped_rows([StageCase("projections", Projections(count).eval(), _inputs((1, 3, 8)))])
    named = ", ".join(f"FULLY_CONNECTED keep_num_dims (operator {index}, FULLY_CONNECTED)" for index in range(4))
    assert shipped.status == "XFAIL" and shipped.expected == f"onert 0.1.0's limits in this graph: {named}{more}"


def test_positional_and_keyword_arguments_are_bound_in_the_signatures_order():
    x, y = torch.ones(1), torch.zeros(1)
    bound = positional(StageCase("add", Add(), (x,), {"y": y}))
    assert len(bound) == 2 and bound[0] is x and bound[1] is y
