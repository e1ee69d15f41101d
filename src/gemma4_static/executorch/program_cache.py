"""The one cache of lowered programs: in this process by identity (a stage's weights and signature,
the one-program form's weights and layout: nothing is exported twice), and on disk by content (the
exported graphs, their weights and constants, the lowering options, this project's lowering code
and the torch and executorch versions, hashed), so a program is never lowered twice, across runs and
across the processes of one run (a lock per program: one lowers, the others wait and read).

The folder is ``$GEMMA4_STATIC_PROGRAM_CACHE`` (``off``: no disk cache), by default
``$XDG_CACHE_HOME/gemma4-static/programs`` (``~/.cache/...``). A program found there is the bytes the
same lowering wrote: a change anywhere in what it was made from is another key, so the cache cannot
hand back a stale program (a fault injected into a stage's code changes its graph, and its key).
What the key cannot see is a change to the lowering made while the process runs (a patched
partitioner): run such a process with ``$GEMMA4_STATIC_PROGRAM_CACHE=off``."""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

CACHE_ENV = "GEMMA4_STATIC_PROGRAM_CACHE"


@dataclass(frozen=True)
class Lowered:
    """A lowered program: its ``.pte`` bytes, how many subgraphs XNNPACK took (``delegated``) and
    which operators fell back to ExecuTorch's portable kernels."""

    buffer: bytes
    delegated: int
    portable: tuple[str, ...]


@dataclass(frozen=True)
class _Entry:
    owner: Any  # held: the ids in the identity stay unique while the entry lives
    label: str
    quantized: bool
    lowered: Lowered


_IN_PROCESS: dict[Hashable, _Entry] = {}


def cache_folder() -> Path | None:
    """Where lowered programs are kept between runs (``None``: ``$GEMMA4_STATIC_PROGRAM_CACHE=off``)."""
    configured = os.environ.get(CACHE_ENV)
    if configured == "off":
        return None
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gemma4-static" / "programs"


def cached_lowering(
    identity: Hashable,
    owner: Any,
    export: Callable[[], dict[str, torch.export.ExportedProgram]],
    build: Callable[[dict[str, torch.export.ExportedProgram]], Lowered],
    options: dict[str, Any],
    *,
    label: str,
    quantized: bool,
) -> Lowered:
    """The program named ``identity`` in this process, else the one on disk with the content of
    ``export()`` and ``options``, else ``build(exported)`` (written to disk for the next run)."""
    if identity in _IN_PROCESS:
        return _IN_PROCESS[identity].lowered
    methods = export()
    lowering = Path(__file__).with_name("lowering.py").read_bytes()
    toolchain = (torch.__version__, metadata.version("executorch"), lowering)

    def program() -> tuple[bytes, dict[str, Any]]:
        lowered = build(methods)
        return lowered.buffer, {"delegated": lowered.delegated, "portable": list(lowered.portable)}

    buffer, facts = stored(content_key(methods, options, toolchain), program, label=label, suffix=".pte")
    lowered = Lowered(buffer, facts["delegated"], tuple(facts["portable"]))
    _IN_PROCESS[identity] = _Entry(owner, label, quantized, lowered)
    return lowered


def stored(
    key: str, build: Callable[[], tuple[bytes, dict[str, Any]]], *, label: str, suffix: str
) -> tuple[bytes, dict[str, Any]]:
    """The bytes and facts kept under the content ``key`` (a file ``key + suffix`` and its facts in
    ``key.json``), else ``build()``'s, written there for the next run; built each time without a disk
    cache (``$GEMMA4_STATIC_PROGRAM_CACHE=off``). Any compiled form of a stage goes through here."""
    folder = cache_folder()
    if folder is None:
        return build()
    from filelock import FileLock

    folder.mkdir(parents=True, exist_ok=True)
    compiled, about = folder / f"{key}{suffix}", folder / f"{key}.json"
    with FileLock(folder / f"{key}.lock"):
        if compiled.exists() and about.exists():
            return compiled.read_bytes(), json.loads(about.read_text())
        started = time.perf_counter()
        buffer, facts = build()
        written = {"label": label, "seconds": round(time.perf_counter() - started, 1), **facts}
        for path, data in ((compiled, buffer), (about, json.dumps(written).encode())):
            partial = path.with_suffix(path.suffix + ".partial")
            partial.write_bytes(data)
            partial.replace(path)  # atomic: a reader never sees half a program
        return buffer, written


def content_key(
    methods: dict[str, torch.export.ExportedProgram], options: dict[str, Any], toolchain: tuple[str | bytes, ...]
) -> str:
    """A SHA-256 of what a compilation reads: each method's graph code and signature, its inputs'
    shapes and dtypes, its weights and constants (names, dtypes, shapes, bytes), the ``options`` and
    the ``toolchain`` (the versions and source of what compiles it)."""
    digest = hashlib.sha256()
    for part in (*toolchain, repr(sorted(options.items()))):
        digest.update(part if isinstance(part, bytes) else part.encode())
    for name, program in sorted(methods.items()):
        digest.update(f"{name}\n{program.graph_module.code}\n{program.graph_signature}".encode())
        for node in program.graph.nodes:  # the code names no shapes: the inputs' shapes and dtypes
            if node.op == "placeholder":
                value = node.meta.get("val")
                shape = tuple(getattr(value, "shape", ()))
                digest.update(f"{node.name} {getattr(value, 'dtype', value)} {shape}".encode())
        for tensor_name, value in sorted({**program.state_dict, **program.constants}.items()):
            digest.update(tensor_name.encode())
            if isinstance(value, torch.Tensor):
                tensor = value.detach().contiguous()
                digest.update(f"{tensor.dtype} {tuple(tensor.shape)}".encode())
                digest.update(tensor.view(-1).view(torch.uint8).numpy().tobytes())
            else:
                digest.update(repr(value).encode())
    return digest.hexdigest()


def lowered_programs() -> list[tuple[str, bool, Lowered]]:
    """Every program this process lowered or read so far: its label (a stage's class, or ``"one
    program"``), whether it is quantized, the program."""
    return [(entry.label, entry.quantized, entry.lowered) for entry in _IN_PROCESS.values()]


def forget_programs() -> None:
    """Forget this process's programs by identity (the next use exports again; the disk cache, keyed by
    content, stays valid)."""
    _IN_PROCESS.clear()
