"""The ``own-checks`` group's rows read as text: a step's verdict in its own words (the lines with a
number or a verdict, else its last line; ``nothing printed``; its error where it raised), beside what
the suite found for the same stages."""

from __future__ import annotations

from types import SimpleNamespace

from gemma4_static.oracle.groups.own_checks import own_check_rows, what_it_said
from gemma4_static.oracle.results.report import Row
from gemma4_static.ports.capabilities.own_checks import OwnCheck


def test_a_step_is_told_in_its_own_words():
    assert what_it_said("[prefill] loading\n[prefill] max |diff| 0.0\nPASSED", "") == "max |diff| 0.0"
    assert what_it_said("loading\nall done", "") == "all done"  # no verdict word: its last line
    assert what_it_said("", "") == "nothing printed"
    assert what_it_said("[prefill] max |diff| 0.0", "IndexError: 3") == "raised IndexError: 3"
    said = what_it_said("[decode] logits [0, 3] max |diff| 0.5", "")  # only the step's own prefix cut
    assert said == "logits [0, 3] max |diff| 0.5"


class _FlowPort:
    name = "my-npu"

    def own_checks(self, prompt):
        return [
            OwnCheck("prefill", "[prefill] max |diff| 0.0: passed", stages=("prefill logits",)),
            OwnCheck("decode", "", stages=("decode steps",), raised="IndexError: 3"),
        ]


def test_each_step_is_a_row_beside_the_suites_rows_for_its_stages():
    suite = [Row("prefill logits", "last valid token per row", "max abs diff", 1.0, 1e-4)]
    session = SimpleNamespace(port=_FlowPort(), port_prompt=None, rows=suite)
    prefill, decode = own_check_rows(session)
    assert (prefill.stage, prefill.metric, prefill.value, prefill.status) == (
        "own checks",
        "suite rows failed",
        1,
        "INFO",
    )
    assert prefill.check.startswith("prefill: my-npu says: max |diff| 0.0: passed | the suite (prefill logits): 1 FAIL")
    assert (
        decode.check == "decode: my-npu says: raised IndexError: 3 | the suite (decode steps): not run in this session"
    )
    assert decode.detail == "my-npu's own flow printed:\n\nraised: IndexError: 3" and decode.value == 0
