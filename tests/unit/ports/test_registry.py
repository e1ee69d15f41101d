"""The port interface without a model: finding ports by name, bad port names, and the probe that
decides whether Qualcomm's documented mask divergence still reproduces."""

from __future__ import annotations

import types

import pytest
import torch

from gemma4_static.oracle.options import VerifyOptions
from gemma4_static.oracle.session.port_under_test import bound_builder
from gemma4_static.ports import Gemma4Port, NotExposed, PortSetup
from gemma4_static.ports.adapters.qnn.support import mask_update_defect
from gemma4_static.ports.registry import BUILT_IN, build_port, port_factory
from gemma4_static.ports.static import StaticRuntimePort

ADAPTER = """
from gemma4_static.ports import Gemma4Port, PortLimits, SchemeLimits


class Adapter(Gemma4Port):
    name = "adapter in a file"
    limits = PortLimits(schemes=SchemeLimits(("8da4w",)))

    def __init__(self, model, setup):
        self.setup = setup


def not_a_port(model, setup):
    return object()


NOT_CALLABLE = 3
"""


def test_built_in_names_find_their_factories():
    assert port_factory("gemma4-static") is StaticRuntimePort
    assert set(BUILT_IN) == {"gemma4-static", "executorch-gemma4", "qnn-gemma4", "tico-gemma4"}


def test_a_factory_in_a_file_or_a_module_is_found(tmp_path, monkeypatch):
    (tmp_path / "team_adapter.py").write_text(ADAPTER)
    from_file = build_port(f"{tmp_path / 'team_adapter.py'}:Adapter", None, PortSetup(max_seq=8))
    assert from_file.name == "adapter in a file" and from_file.setup.max_seq == 8
    monkeypatch.syspath_prepend(str(tmp_path))
    assert port_factory("team_adapter:Adapter").name == "adapter in a file"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "port must be a built-in name"),
        (None, "port must be a built-in name"),
        ("team_adapter", "got 'team_adapter'"),
        ("no_such_module_anywhere:Port", "port 'no_such_module_anywhere:Port' cannot be imported"),
        ("missing.py:Port", "port 'missing.py:Port' cannot be imported: no adapter file missing.py"),
        ("{dir}/team_adapter.py:Missing", "has no callable 'Missing'"),
        ("{dir}/team_adapter.py:NOT_CALLABLE", "has no callable 'NOT_CALLABLE'"),
    ],
)
def test_bad_port_names_are_value_errors_naming_the_port(name, message, tmp_path):
    (tmp_path / "team_adapter.py").write_text(ADAPTER)
    if isinstance(name, str):
        name = name.format(dir=tmp_path)
    with pytest.raises(ValueError, match="port") as error:
        port_factory(name)
    assert message in str(error.value)


def test_a_port_gets_the_integer_scheme_in_its_setup(tmp_path):
    """The run's builder hands another port its scheme as ``setup.quant`` (the port quantizes itself);
    the runtime's own options are refused for it when the options are made."""
    (tmp_path / "team_adapter.py").write_text(ADAPTER)
    name = f"{tmp_path / 'team_adapter.py'}:Adapter"
    port = bound_builder(None, VerifyOptions(port=name, quant="8da4w"))(PortSetup(max_seq=8))
    assert port.setup == PortSetup(max_seq=8, quant="8da4w")
    for runtime_option in ({"mask_value": -1.0}, {"backend": "torch-packed"}, {"backend": "executorch-stages"}):
        with pytest.raises(ValueError, match="backend and mask_value are options of the gemma4-static runtime"):
            VerifyOptions(port=name, **runtime_option)


def test_a_factory_that_returns_no_port_is_a_value_error(tmp_path):
    (tmp_path / "team_adapter.py").write_text(ADAPTER)
    with pytest.raises(ValueError, match="returned object, not a Gemma4Port"):
        build_port(f"{tmp_path / 'team_adapter.py'}:not_a_port", None, PortSetup(max_seq=8))


def test_a_stage_a_port_lacks_raises_not_exposed_naming_it():
    port = Gemma4Port()
    with pytest.raises(NotExposed, match="unnamed port does not expose a decode step"):
        port.decode(torch.zeros(1, 1, dtype=torch.long))
    with pytest.raises(NotExposed, match="greedy generation"):
        port.generate(None, max_new_tokens=1)


class _Mask:
    """A smart mask as Qualcomm's ``masking_utils`` docstrings draw it, ``(B, 1, ar_len, context)``
    additive, on the head-axis-aware indexing: query ``i`` of a program sits in slot ``context -
    ar_len + i``; ``smart_mask_update(pos, n)`` opens cache slots ``[pos, pos + n)``."""

    def __init__(self, batch, ar_len, context, sliding_window=None):
        self.ar_len, self.window = ar_len, sliding_window
        self.mask = torch.full((batch, 1, ar_len, context), -65535.0)
        for i in range(ar_len):
            first = 0 if sliding_window is None else max(0, i + 1 - sliding_window)
            self.mask[:, :, i, context - ar_len + first : context - ar_len + i + 1] = 0

    def smart_mask_update(self, pos, n_updates, _):
        self.mask[:, :, :, pos : pos + n_updates] = 0
        if self.window is not None:
            for i in range(self.ar_len):
                keep = self.window - (i + 1)
                if pos + n_updates > keep:
                    self.mask[:, :, i, : pos + n_updates - keep] = -65535.0


def test_the_qnn_mask_probe_finds_nothing_once_the_update_is_right():
    """The probe behind the QNN port's expected failures must stop excusing them once Qualcomm's
    update is right: on masks updated as its docstrings draw, it reports no defect (the lane checks
    that it still reports the defect on the installed ``executorch``)."""
    fixed = types.SimpleNamespace(
        CausalAttentionMask=lambda batch, ar_len, context: _Mask(batch, ar_len, context),
        SlidingWindowAttentionMask=lambda batch, ar_len, context, sliding_window: _Mask(
            batch, ar_len, context, sliding_window
        ),
    )
    assert mask_update_defect(fixed) is None
