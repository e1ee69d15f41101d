"""``--mask-value`` reaches every group: with a fill of -1 (far too weak to mask anything: a forbidden
key keeps about e^-1 of an allowed key's weight) every group that runs a masked prefill or decode of
the port fails, whether it runs the sample setup's port or builds its own (chunked prefill, the
schedules grid, the long context), and the groups that only compare boolean masks or tables do not;
the report records the fill."""

from __future__ import annotations

import pytest

from gemma4_static.commands import cli
from gemma4_static.oracle.flow.verify import run_group
from gemma4_static.oracle.groups import names
from tests.reports import read_report

pytestmark = pytest.mark.usefixtures(
    "reuse_session_models",  # the command gets the session's models
    "hf_answers_kept",  # HF asked each question once (faulty and correct runs share it)
)

# the groups that run the port's attention over a padded or masked key range
MASKED = {"inputs", "mask-value", "layers", "chunked-prefill", "decode", "schedules", "long-positions"}


# export left out: its graphs replay their own eager outputs, whatever the fill (and it costs 5 s)
@pytest.mark.parametrize("group", [name for name in names("float32") if name != "export"])
def test_a_fill_of_minus_one_fails_every_masked_group(weak_fill_session, group):
    rows = run_group(weak_fill_session, group)
    failed = [row for row in rows if row.failed]
    if group in MASKED:
        assert failed, f"{group} passed with a fill of -1: it judged a port without the run's mask fill"
    else:
        assert not failed, [row.check for row in failed]


def test_the_report_records_the_fill(tmp_path):
    report_path = tmp_path / "report.json"
    args = ["verify", "--mask-value", "-1", "--json", str(report_path)]
    assert (
        cli.main([*args, *(option for name in names() if name != "mask-value" for option in ("--without", name))]) == 1
    )
    report = read_report(report_path)
    assert report["metadata"]["options"]["mask_value"] == -1.0
    row = report["rows"][0]
    assert row["check"].startswith("-1 over ") and row["status"] == "FAIL"
