"""The cache of lowered programs: a program is found again by its content only (graph, input shapes,
weights, options), across processes through the disk, and never handed back for other content."""

from __future__ import annotations

import json

import torch

from gemma4_static.executorch import program_cache
from gemma4_static.executorch.lowering import export_for_lowering
from gemma4_static.executorch.program_cache import CACHE_ENV, Lowered, cache_folder, cached_lowering, content_key


class Scale(torch.nn.Module):
    def __init__(self, size: int) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.arange(size, dtype=torch.float32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.weight


def _exported(module: torch.nn.Module, rows: int) -> dict[str, torch.export.ExportedProgram]:
    return {"forward": export_for_lowering(module, (torch.ones(rows, 4),))}


TOOLCHAIN = ("torch 2.13", "compiler 1.0", b"compiler source")


def test_the_key_follows_the_content():
    module = Scale(4)
    key = content_key(_exported(module, 2), {}, TOOLCHAIN)
    assert key == content_key(_exported(Scale(4), 2), {}, TOOLCHAIN)  # another module of the same content
    assert key != content_key(_exported(module, 3), {}, TOOLCHAIN)  # same graph code, another input shape
    assert key != content_key(_exported(module, 2), {"mutable_buffers": ("k_cache",)}, TOOLCHAIN)
    assert key != content_key(_exported(module, 2), {}, (*TOOLCHAIN[:2], b"compiler source changed"))
    assert key != content_key(_exported(module, 2), {}, ("torch 2.14", *TOOLCHAIN[1:]))
    with torch.no_grad():
        module.weight[0] += 1e-6
    assert key != content_key(_exported(module, 2), {}, TOOLCHAIN)  # one weight moved


def test_a_program_is_lowered_once_then_read_from_disk(fresh):
    built = []

    def build(methods):
        built.append(methods)
        return Lowered(b"program bytes", 1, ("aten::scatter.src",))

    module = Scale(4)
    first = cached_lowering("a", module, lambda: _exported(module, 2), build, {}, label="Scale", quantized=False)
    again = cached_lowering("a", module, lambda: _exported(module, 2), build, {}, label="Scale", quantized=False)
    program_cache.forget_programs()  # as another process: nothing held, the disk remains
    other = Scale(4)
    read = cached_lowering("b", other, lambda: _exported(other, 2), build, {}, label="Scale", quantized=False)
    assert len(built) == 1 and first == again == read
    assert cache_folder() == fresh and len(list(fresh.glob("*.pte"))) == 1
    (facts,) = [json.loads(path.read_text()) for path in fresh.glob("*.json")]  # the folder says what it holds
    assert facts["label"] == "Scale" and facts["seconds"] >= 0 and facts["portable"] == ["aten::scatter.src"]
    shape = cached_lowering("c", other, lambda: _exported(other, 3), build, {}, label="Scale", quantized=False)
    assert len(built) == 2 and shape == first  # another shape is lowered again (the fake build's bytes)
    assert [label for label, _, _ in program_cache.lowered_programs()] == ["Scale", "Scale"]


def test_the_disk_cache_can_be_turned_off(monkeypatch, tmp_path):
    monkeypatch.setenv(CACHE_ENV, "off")
    assert cache_folder() is None
    monkeypatch.delenv(CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_folder() == tmp_path / "gemma4-static" / "programs"
