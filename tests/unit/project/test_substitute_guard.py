"""The suite's guard against a test's substitute outliving it (``tests/suite.py``): a mock or a
function of a test module left bound in the library is named, a name found clean before included;
restored, nothing is."""

from __future__ import annotations

from unittest import mock

from gemma4_static.npu import ops
from tests.suite import leaked_substitutes


def _substitute(x, *args, **kwargs):
    return x


def test_the_guard_names_a_substitute_left_in_the_library_and_nothing_once_restored():
    assert leaked_substitutes() == []  # every name found clean, and remembered so
    with mock.patch.object(ops, "rms_norm", mock.Mock(name="norm")), mock.patch.object(ops, "gelu_tanh", _substitute):
        leaked = leaked_substitutes()
    assert [line.split(" = ")[0] for line in leaked] == [
        "gemma4_static.npu.ops.rms_norm",
        "gemma4_static.npu.ops.gelu_tanh",
    ]
    assert leaked_substitutes() == []


def test_a_class_is_looked_at_again_after_its_module_held_a_substitute_for_it():
    from gemma4_static.cpu import cache

    assert leaked_substitutes() == []
    with mock.patch.object(cache, "StaticKVCache", mock.Mock(name="cache class")):
        assert [line.split(" = ")[0] for line in leaked_substitutes()] == ["gemma4_static.cpu.cache.StaticKVCache"]
    with mock.patch.object(cache.StaticKVCache, "advance", _substitute):  # the class itself, restored
        assert [line.split(" = ")[0] for line in leaked_substitutes()] == [
            "gemma4_static.cpu.cache.StaticKVCache.advance"
        ]
    assert leaked_substitutes() == []
