"""Circle round-trip rows: each stage case converted by TICO and executed by onert
(:mod:`gemma4_static.circle.graphs`) against the module it came from, output by output, on the same
inputs. A graph TICO does not convert, or onert does not load, is a FAIL row naming the stage and
the refusal (onert's own message is printed on its stderr, not in its exception); so is a graph
returning another number of outputs than its module.

:func:`circle_rows` judges graphs this project converts (its own stages, with its export rewrites);
:func:`shipped_rows` a port's graphs as its toolchain converts them, three rows per graph, so a reader
sees what each party's fix is worth: **as shipped** (TICO's defaults, the file as it comes: where
onert refuses it or returns another rank, and the graph holds one of onert's known limits
(:mod:`gemma4_static.circle.onert_limits`), the row is XFAIL naming the limit and the operator, a
reason that holds only there); **executed** (onert's limits worked around in the file, TICO's
operators untouched); **with TICO's fix** (the same, TICO's ``RemoveRedundantReshapePattern3``
disabled: it drops the rank-changing ``squeeze`` of an attention mask, leaving a malformed graph).
Those graphs run in a child process (:mod:`gemma4_static.circle.isolated`): onert may crash on a
malformed graph.
:func:`conversion_rows`: a port's quantized graphs (an integer profile), whether TICO converts each
(INFO: no runtime here executes an integer Circle graph).

Tolerance: float32 summation orders only (onert's CPU kernels against PyTorch's, as XNNPACK's
against the PyTorch backend): ``tolerances.RELATIVE``, ``2e-5 * max(1, max |module|)``."""

from __future__ import annotations

import inspect
import math
import traceback
from dataclasses import replace
from pathlib import Path

import torch
from torch.utils import _pytree as pytree

from ...circle.onert_limits import CONST_LHS_BMM, FC_KEEP_DIMS, RANK2_RMS_NORM, READ_OUTPUT, Found
from ...export import StageCase
from ..results import tolerances
from ..results.report import Row, merge
from .parity import compare

STAGE = "circle round-trip"
# how each of onert's limits (circle.onert_limits) shows in a round trip's check: onert's message, another
# shape (" vs ("), or wrong values (a merged row naming its first failing output, "[first: ")
SYMPTOMS = {
    FC_KEEP_DIMS: ("ShapeValidator failed", "StaticShapeInferer failed", " vs ("),
    RANK2_RMS_NORM: ("ShapeValidator failed",),
    CONST_LHS_BMM: ("OperationValidator failed",),
    READ_OUTPUT: ("[first: ",),
}
TICO_FIX = "RemoveRedundantReshapePattern3"  # TICO 0.3.0's pass that drops a rank-changing squeeze


def positional(case: StageCase) -> tuple:
    """The case's inputs in the order of its module's ``forward`` (a Circle graph takes its inputs by
    position): keyword arguments bound to their parameters; a ``ValueError`` for a keyword-only one."""
    if not case.kwargs:
        return case.args
    bound = inspect.signature(case.module.forward).bind(*case.args, **case.kwargs)
    if bound.kwargs:
        raise ValueError(
            f"a Circle graph takes positional inputs only, got {case.name!r} with keyword-only {sorted(bound.kwargs)}"
        )
    return bound.args


def circle_rows(cases: list[StageCase], *, disabled: tuple[str, ...] = ()) -> list[Row]:
    """A row per output of each case's Circle graph against the case's module (``disabled``: TICO
    passes left out of the conversion), or one FAIL row for a case that does not convert or load, or
    returns another number of outputs."""
    from ...circle.graphs import CircleSession, convert, refusals
    from ...npu.flat_call import flat_tensors

    rows = []
    for case in cases:
        args = positional(case)
        try:
            session = CircleSession(convert(case.module, args, label=case.name, disabled=disabled))
            outputs = session(flat_tensors(args)[0])
        except refusals() as error:
            rows.append(_failed(f"{case.name}: {type(error).__name__}: {str(error).splitlines()[0]}"))
            continue
        rows += _output_rows(case.name, outputs, _expected(case, args))
    return rows


def shipped_rows(cases: list[StageCase]) -> list[Row]:
    """Three rows per case (as shipped, executed with onert's limits worked around, with TICO's fix),
    each its graph's outputs against the module's, merged to the worst."""
    return [row for case in cases for row in _shipped_case_rows(case)]


def conversion_rows(cases: list[StageCase], scheme: str) -> list[Row]:
    """A row per case of a port in the integer ``scheme`` (its quantized modules): whether TICO
    converts it as shipped, and TICO's error where not. INFO (counted, not gated: no runtime here
    executes an integer Circle graph; onert loads no int16 one)."""
    from ...circle.graphs import convert

    rows = []
    for case in cases:
        check = f"{case.name} in {scheme}: converts as shipped"
        try:
            convert(case.module, positional(case), label=f"{case.name} {scheme}", rewrites=False)
        except Exception as error:  # TICO refusing its own quantized graph is the row's result
            check = f"{case.name} in {scheme}: TICO does not convert it: {type(error).__name__}: {_line(error)}"
            rows.append(Row(STAGE, check, "converted", 0.0, math.inf))
            continue
        rows.append(Row(STAGE, check, "converted", 1.0, math.inf))
    return rows


def _shipped_case_rows(case: StageCase) -> list[Row]:
    from ...circle import onert_limits
    from ...circle.graphs import convert

    args = positional(case)
    expected = _expected(case, args)  # before anything runs it: a graph may write into its inputs
    try:
        shipped = convert(case.module, args, label=f"{case.name} as shipped", rewrites=False).buffer
    except Exception as error:  # TICO refusing its own graph is the row's result
        return [_failed(f"{case.name}: TICO does not convert it: {type(error).__name__}: {_line(error)}")]
    found = onert_limits.found_limits(shipped)
    rows = [_run_row(case.name, args, expected, f"{case.name} as shipped", shipped, found)]
    options = {
        name: value for limit in found for name, value in onert_limits.CONVERSION_OPTIONS.get(limit.limit, {}).items()
    }
    named = sorted({limit.limit for limit in found}) + [f"TICO option {name}" for name in options]
    workaround = "onert's limits worked around: " + (", ".join(named) or "none found")
    for title, disabled in (("executed", ()), ("with TICO's fix", (TICO_FIX,))):
        check = f"{case.name} {title} ({workaround}" + (f"; {TICO_FIX} disabled)" if disabled else ")")
        try:
            graph = shipped
            if options or disabled:
                label = f"{case.name} {title}"
                graph = convert(
                    case.module, args, label=label, config=options, disabled=disabled, rewrites=False
                ).buffer
        except Exception as error:
            rows.append(_failed(f"{check}: TICO does not convert it: {type(error).__name__}: {_line(error)}"))
            continue
        rows.append(_run_row(case.name, args, expected, check, onert_limits.worked_around(graph), []))
    return rows


def _run_row(
    name: str, args: tuple, expected: list[torch.Tensor], check: str, graph: bytes, limits: list[Found]
) -> Row:
    """``graph`` run in onert (a child process) on ``args`` against the module's ``expected`` outputs,
    merged; XFAIL where it fails and ``limits`` (onert's, found in it) explain it."""
    from ...circle.isolated import OnertRefused, run_isolated
    from ...npu.flat_call import flat_tensors

    try:
        outputs = run_isolated(graph, flat_tensors(args)[0])
    except OnertRefused as error:
        return _explained(_failed(f"{check}: onert: {error}"), limits)
    return _explained(merge(_output_rows(name, outputs, expected), STAGE, check), limits)


def _expected(case: StageCase, args: tuple) -> list[torch.Tensor]:
    """The module's outputs on a copy of ``args`` (a module writing into its inputs leaves them as they were)."""
    copied = pytree.tree_map(lambda leaf: leaf.clone() if isinstance(leaf, torch.Tensor) else leaf, args)
    with torch.no_grad():
        return pytree.tree_leaves(case.module(*copied))


def _output_rows(name: str, outputs: list[torch.Tensor], expected: list[torch.Tensor]) -> list[Row]:
    """A row per output against the module's, or one FAIL row where the counts differ."""
    if len(outputs) != len(expected):
        return [_failed(f"{name}: {len(outputs)} outputs where the module returns {len(expected)}")]
    gates = [tolerances.scaled(tolerances.RELATIVE[torch.float32], reference) for reference in expected]
    return [
        compare(STAGE, f"{name} output {index}", outputs[index], reference, gates[index])
        for index, reference in enumerate(expected)
    ]


def _explained(row: Row, limits: list[Found]) -> Row:
    """A failing as-shipped row XFAIL where its graph holds onert's known limits that fail the way it
    failed (:func:`explains`), named with their operators; any
    other row as it is (a crash, another refusal: FAIL)."""
    if not row.failed:
        return row
    explaining = [limit for limit in limits if explains(limit, row.check)]
    if not explaining:
        return row
    named = ", ".join(str(limit) for limit in explaining[:4])
    more = f" and {len(explaining) - 4} more" if len(explaining) > 4 else ""
    return replace(row, expected=f"onert 0.1.0's limits in this graph: {named}{more}")


def explains(found: Found, check: str) -> bool:
    """Whether onert's limit ``found`` fails a round trip the way its ``check`` says it failed (:data:`SYMPTOMS`)."""
    return any(symptom in check for symptom in SYMPTOMS[found.limit])


def _line(error: Exception) -> str:
    """The error's first line; for one without a message (a bare ``assert``), where it was raised."""
    lines = str(error).strip().splitlines()
    if lines:
        return lines[0]
    frame = traceback.extract_tb(error.__traceback__)[-1]
    return f"raised at {Path(frame.filename).name}:{frame.lineno} ({frame.name})"


def _failed(check: str) -> Row:
    """A FAIL row of the round trip: nothing to compare."""
    return Row(STAGE, check, "max abs diff", math.inf, 0.0)
