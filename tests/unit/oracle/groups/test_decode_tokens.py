"""The decode group feeds every port the same tokens, drawn from its own seed: two runs of it feed a
port the same decode steps (a recorded reference holds HF's answers for exactly those)."""

from __future__ import annotations

import pytest
import torch

from gemma4_static.oracle.faults.port_faults import WrappedRuntimePort
from gemma4_static.oracle.flow.verify import verify
from gemma4_static.oracle.options import VerifyOptions

FED: list[torch.Tensor] = []  # each decode call's ids


class DecodeRecorder(WrappedRuntimePort):
    """This runtime, recording the ids of every decode step it is fed."""

    def decode(self, next_ids: torch.Tensor) -> torch.Tensor:
        FED.append(next_ids.clone())
        return super().decode(next_ids)


@pytest.mark.usefixtures("hf_answers_kept")  # the second run asks HF the first one's questions
def test_two_runs_of_the_decode_group_feed_the_same_tokens(tiny_model):
    options = VerifyOptions(port=f"{__name__}:DecodeRecorder", groups=("decode",), steps=3)
    runs = []
    for _ in range(2):
        FED.clear()
        torch.rand(7)  # the global generator moved between the runs, as other work moves it
        rows = verify(tiny_model, options).rows
        assert rows and not any(row.failed for row in rows)
        runs.append(list(FED))
    assert len(runs[0]) > 1 and len(runs[0]) == len(runs[1])
    assert all(torch.equal(first, second) for first, second in zip(*runs, strict=True))
