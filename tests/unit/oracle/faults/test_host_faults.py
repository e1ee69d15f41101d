"""Each host-side stage a port may expose has a designed fault (a wrapper port around this runtime)
that only its check group catches: the self-test lane runs verify on each and checks which stages
fail; the same wrapper without a fault passes everything it exposes."""

from __future__ import annotations

import pytest

from gemma4_static.oracle.faults.host_faults import CAUGHT_BY, HostStagesPort
from gemma4_static.oracle.flow.verify import verify
from gemma4_static.oracle.groups import names
from gemma4_static.oracle.options import VerifyOptions

pytestmark = pytest.mark.self_test
MODULE = "gemma4_static.oracle.faults.host_faults"
CHECKED = tuple(group for group in names() if group != "schedules")  # the grid judges the logits, not these stages


@pytest.mark.parametrize("fault", [HostStagesPort, *CAUGHT_BY], ids=lambda fault: fault.__name__)
def test_only_the_stage_a_fault_breaks_fails(fault, tiny_model, report):
    result = verify(tiny_model, VerifyOptions(port=f"{MODULE}:{fault.__name__}", groups=CHECKED))
    failed = sorted({row.stage for row in result.rows if row.failed})
    assert failed == sorted(CAUGHT_BY.get(fault, ())), result.verdict.summary()
    host = {"static inputs", "masks decode", "RoPE decode", "mask value", "KV cache", "export round-trip"}
    assert host - set(failed) <= set(result.verdict.compared_stages)  # a broken stage may raise instead
    report(f"{fault.__name__}: caught by {failed or 'nothing (no fault)'}")
