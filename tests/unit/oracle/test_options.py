"""Every option of a run in one frozen object, validated when it is made (a bad one is a clear error
naming it, before any model is built), and bound once where the run makes port instances: the mask
fill reaches every group that builds its own port."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch

from gemma4_static.oracle.options import VerifyOptions, group_names
from gemma4_static.oracle.references.reference_folder import open_reference
from gemma4_static.oracle.session.port_under_test import PortUnderTest
from gemma4_static.oracle.session.session import open_session
from gemma4_static.oracle.shards import Shard
from gemma4_static.ports import PortSetup
from gemma4_static.ports.static import StaticRuntimePort


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"dtype": torch.int8}, ValueError, "dtype must be one of [torch.float32, torch.bfloat16, torch.float16]"),
        ({"max_seq": 0}, ValueError, "max_seq must be a positive int or None, got 0"),
        ({"steps": 2.5}, ValueError, "steps must be a positive int or None, got 2.5"),
        ({"schedules_budget": 0}, ValueError, "schedules_budget must be a positive int, got 0"),
        ({"groups": ("rope", "ropes")}, ValueError, "groups has unknown names ['ropes']; expected a tuple of some of"),
        ({"groups": ["rope"]}, ValueError, "groups has unknown names []; expected a tuple of some of"),
        ({"mask_value": math.nan}, ValueError, "mask_value must be a number or None, got nan"),
        ({"mask_value": "-1"}, ValueError, "mask_value must be a number or None, got '-1'"),
        ({"backend": "tpu"}, ValueError, "backend must be one of ('torch', 'torch-packed', 'executorch', 'executorch-"),
        ({"backend": "circle-stages", "quant": "a8w8"}, ValueError, "backend='circle-stages' runs float graphs"),
        ({"backend": "torch-packed", "quant": "a8w8"}, ValueError, "backend='torch-packed' runs float weights"),
        ({"port": "no_such_module:Port"}, ValueError, "port 'no_such_module:Port' cannot be imported"),
        ({"port": "tico-gemma4", "mask_value": -1.0}, ValueError, "backend and mask_value are options of the"),
        ({"quant": "int3"}, ValueError, "quant scheme 'int3' has an unknown base"),
        ({"quant": "a8w8", "dtype": torch.bfloat16}, ValueError, "quant runs over float32, not bfloat16"),
        ({"port": "tico-gemma4", "quant": "a8w8"}, ValueError, "port 'tico-gemma4' runs the integer schemes"),
        ({"port": "tico-gemma4", "dtype": torch.bfloat16}, ValueError, "port 'tico-gemma4' runs ['float32']"),
        ({"shard": "1/2"}, TypeError, "shard must be a Shard, got '1/2'"),
    ],
)
def test_a_bad_option_is_a_clear_error_when_the_options_are_made(options, error, message):
    with pytest.raises(error) as raised:
        VerifyOptions(**options)
    assert message in str(raised.value)


def test_the_options_are_frozen_and_say_what_they_run():
    options = VerifyOptions(quant="a8w8", mask_value=-30000.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.mask_value = -1.0
    assert options.profile == "a8w8 over float32" and not options.float32 and options.scheme.name == "a8w8"
    assert options.runs("rope") and not options.without("rope", "export").runs("rope")
    assert options.without("rope").groups == tuple(name for name in group_names() if name != "rope")
    recorded = options.as_dict()
    assert recorded["mask_value"] == -30000.0 and recorded["groups"] is None and recorded["quant"] == "a8w8"
    assert recorded["dtype"] == "float32" and VerifyOptions(dtype=torch.bfloat16).as_dict()["dtype"] == "bfloat16"
    assert recorded["shard"] is None and VerifyOptions(shard=Shard.parse("2/3")).as_dict()["shard"] == "2/3"
    assert list(recorded) == [field.name for field in dataclasses.fields(VerifyOptions)]  # every option, by its name
    assert json.loads(json.dumps(recorded, allow_nan=False)) == recorded  # strict JSON as recorded


def test_a_reference_that_is_no_reference_is_refused_before_any_work(tmp_path):
    with pytest.raises(ValueError, match="reference must be a folder written by gemma4-static record"):
        VerifyOptions(reference=open_reference(tmp_path))


def test_every_instance_a_run_builds_has_the_runs_options(tiny_model):
    """The sample setup's port and every further one (another setup, a schedule) share the run's
    mask fill and backend: the options are bound where instances are made."""
    session = open_session(tiny_model, VerifyOptions(mask_value=-7.0, groups=("mask-value",)))
    try:
        assert isinstance(session.under_test, PortUnderTest) and session.port.mask_fill_value() == -7.0
        with session.built(PortSetup(16, prefill_schedule=(3,))) as built:
            assert isinstance(built, StaticRuntimePort) and built.mask_fill_value() == -7.0
            assert built.runtime.stack.fill == -7.0 and built.options["backend"] == "torch"
    finally:
        session.close()
    with pytest.raises(dataclasses.FrozenInstanceError):
        session.port = None
