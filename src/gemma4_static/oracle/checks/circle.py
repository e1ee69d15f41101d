"""Circle round-trip rows: each stage case converted by TICO and executed by onert
(:mod:`gemma4_static.circle.graphs`) against the module it came from, output by output, on the same
inputs. A graph TICO does not convert, or onert does not load, is a FAIL row naming the stage and
the refusal (onert's own message is printed on its stderr, not in its exception); so is a graph
returning another number of outputs than its module.

Tolerance: float32 summation orders only (onert's CPU kernels against PyTorch's, as XNNPACK's
against the PyTorch backend): ``tolerances.RELATIVE``, ``2e-5 * max(1, max |module|)``."""

from __future__ import annotations

import math

import torch
from torch.utils import _pytree as pytree

from ...export import StageCase
from ..results import tolerances
from ..results.report import Row
from .parity import compare

STAGE = "circle round-trip"


def circle_rows(cases: list[StageCase], *, disabled: tuple[str, ...] = ()) -> list[Row]:
    """A row per output of each case's Circle graph against the case's module (``disabled``: TICO
    passes left out of the conversion), or one FAIL row for a case that does not convert or load, or
    returns another number of outputs. A ``ValueError`` for a case with keyword arguments (a Circle
    graph takes its inputs by position)."""
    from ...circle.graphs import CircleSession, convert, refusals
    from ...npu.flat_call import flat_tensors

    rows = []
    for case in cases:
        if case.kwargs:
            raise ValueError(
                f"a Circle graph takes positional inputs only, got {case.name!r} with {sorted(case.kwargs)}"
            )
        try:
            session = CircleSession(convert(case.module, case.args, label=case.name, disabled=disabled))
            outputs = session(flat_tensors(case.args)[0])
        except refusals() as error:
            rows.append(_failed(f"{case.name}: {type(error).__name__}: {str(error).splitlines()[0]}"))
            continue
        with torch.no_grad():
            expected = pytree.tree_leaves(case.module(*case.args))
        if len(outputs) != len(expected):
            rows.append(_failed(f"{case.name}: {len(outputs)} outputs where the module returns {len(expected)}"))
            continue
        for index, reference in enumerate(expected):
            tolerance = tolerances.scaled(tolerances.RELATIVE[torch.float32], reference)
            rows.append(compare(STAGE, f"{case.name} output {index}", outputs[index], reference, tolerance))
    return rows


def _failed(check: str) -> Row:
    """A FAIL row of the round trip: nothing to compare."""
    return Row(STAGE, check, "max abs diff", math.inf, 0.0)
