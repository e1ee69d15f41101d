"""Each fault of a port's static scheme (a wrapper port around this runtime in ``a8w8``, calibrated
through the port interface, :mod:`gemma4_static.oracle.faults.static_faults`) is caught, by the
stages :data:`CAUGHT_BY` names and no other; the same wrapper without a fault passes every group."""

from __future__ import annotations

import pytest

from gemma4_static.oracle.faults.static_faults import CAUGHT_BY, StaticSchemePort
from gemma4_static.oracle.flow.verify import verify
from gemma4_static.oracle.options import VerifyOptions

pytestmark = pytest.mark.self_test
MODULE = "gemma4_static.oracle.faults.static_faults"
GROUPS = ("quantization", "inputs", "layers", "decode")  # every group a calibrated port's scheme reaches


@pytest.mark.parametrize("fault", [StaticSchemePort, *CAUGHT_BY], ids=lambda fault: fault.__name__)
def test_a_static_scheme_fault_is_caught_by_its_stages(fault, tiny_model, report):
    result = verify(tiny_model, VerifyOptions(port=f"{MODULE}:{fault.__name__}", quant="a8w8", groups=GROUPS))
    failed = {row.stage for row in result.rows if row.failed}
    assert failed == set(CAUGHT_BY.get(fault, ())), result.verdict.summary()
    ranges = [row for row in result.rows if row.stage == "quantization"]
    assert len(ranges) == 2 and all(row.check.startswith("83 of its 83 calibrated ranges") for row in ranges)
    first = next((row for row in result.rows if row.failed), None)
    report(f"{fault.__name__}: caught by {sorted(failed) or 'nothing (no fault)'}; first: {first and first.check}")
