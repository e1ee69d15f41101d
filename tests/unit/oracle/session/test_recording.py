"""What a session records while a group runs its port: this runtime's activation ranges (the
overflow group's figures), over the calls in the block and only there; nothing for another port."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from gemma4_static.oracle.references.samples import text_prompt
from gemma4_static.oracle.session.session import Session
from gemma4_static.ports import PortSetup
from gemma4_static.ports.static import StaticRuntimePort


@pytest.mark.parametrize("is_runtime", [True, False], ids=["this-runtime", "another-port"])
def test_a_decode_in_the_block_is_recorded_for_this_runtime_only(tiny_model, is_runtime):
    port = StaticRuntimePort(tiny_model, PortSetup(16, 1))
    port.prefill(text_prompt(tiny_model.config, [5], seed=1))
    session = SimpleNamespace(port=port, ranges={}, is_runtime=is_runtime)
    with Session.recording(session):
        port.decode(torch.tensor([[7]]))
    recorded = dict(session.ranges)
    port.decode(torch.tensor([[8]]))  # after the block: not recorded
    assert session.ranges == recorded
    if not is_runtime:
        assert recorded == {}
        return
    layers = {name.split()[1] for name in recorded if name.startswith("layer ")}
    assert layers == {str(index) for index in range(tiny_model.config.get_text_config().num_hidden_layers)}
    assert "embedding" in recorded and all(value > 0 for value in recorded.values()), recorded
