"""The reproduction the fuzzer writes for a divergence (the self-test lane runs one end to end): the
model in HF's format beside a script that inlines the calls, names the model's class, the port and
its static sizes; written into a folder made as needed, and again over an earlier one."""

from __future__ import annotations

import ast

import torch

from gemma4_static.oracle.fuzz.repro import factory_import, write_reproduction
from gemma4_static.oracle.fuzz.target import FuzzTarget
from gemma4_static.oracle.references.samples import text_prompt
from gemma4_static.ports.static import StaticRuntimePort
from tests.unit.ports.port_adapters import NothingPort


def test_a_reproduction_inlines_its_calls_beside_the_model(tiny_model, tmp_path):
    target = FuzzTarget("gemma4-static", tiny_model, 16, StaticRuntimePort.limits, build=lambda setup: None)
    prompt = text_prompt(tiny_model.config, [5], seed=2)
    calls = [
        {"op": "prefill", "prompt": prompt, "schedule": None, "chunks": None, "intermediates": False},
        {"op": "decode", "ids": torch.tensor([[7]])},
    ]
    folder = tmp_path / "runs" / "first"  # its parent does not exist yet
    for _ in range(2):  # written again over the first
        script = write_reproduction(folder, target, calls, "row 0 position 5 (decode step 0): 3.1 > 2e-05")
    text = script.read_text()
    assert script == folder / "reproduce.py" and (folder / "model" / "config.json").is_file()
    ast.parse(text)  # a script Python reads
    assert "from transformers import Gemma4ForConditionalGeneration\n" in text
    assert "port 'gemma4-static'" in text and "row 0 position 5 (decode step 0): 3.1 > 2e-05" in text
    assert "MAX_SEQ, BATCH = 16, 1\n" in text
    assert repr(prompt.input_ids.tolist()) in text and "'ids': [[7]]" in text


def test_the_scripts_import_binds_the_ports_factory_from_a_module_or_a_file(tmp_path):
    """A port named by module or by an adapter file's path (``verify --port path/adapter.py:make``):
    the line the script runs binds that factory as ``factory``."""
    adapter = tmp_path / "adapter.py"
    adapter.write_text("def make(model, setup):\n    return ('made', model, setup)\n")
    for name, expected in ((f"{adapter}:make", ("made", 1, 2)), ("tests.unit.ports.port_adapters:NothingPort", None)):
        namespace: dict = {}
        exec(factory_import(name), namespace)  # the script's own line, run as the script runs it
        if expected is None:
            assert namespace["factory"] is NothingPort
        else:
            assert namespace["factory"](1, 2) == expected
