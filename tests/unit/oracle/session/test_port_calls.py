"""Whose error an exception is (:func:`~gemma4_static.oracle.session.port_calls.raised_in`): the
oracle's own (a broken check, never a finding about the port) or the port's."""

from __future__ import annotations

import pytest
import torch

from gemma4_static.oracle.session.port_calls import raised_in
from gemma4_static.oracle.session.sample_plan import sample_plan
from gemma4_static.ports.static import StaticRuntimePort
from gemma4_static.runtime import StaticGemma4Runtime


def test_an_error_with_no_frame_of_either_side_is_the_ports():
    assert raised_in(ValueError("built, never raised")) == "port"
    with pytest.raises(ValueError) as raised:
        int("x")  # raised in the standard library, called from here
    assert raised_in(raised.value) == "port"


def test_an_error_raised_in_the_oracle_is_the_oracles(tiny_model):
    with pytest.raises(AttributeError) as raised:
        sample_plan(tiny_model.config, None, 0, -1)  # None where its limits belong: raised inside the oracle
    assert raised_in(raised.value) == "oracle"


def test_an_error_raised_in_the_runtime_is_the_ports(tiny_model):
    port = StaticRuntimePort.around(StaticGemma4Runtime(tiny_model, max_seq=8), tiny_model.config)
    with pytest.raises(Exception) as raised:
        port.decode(torch.zeros(1, 1, dtype=torch.long))  # a decode before any prefill
    assert raised_in(raised.value) == "port"
