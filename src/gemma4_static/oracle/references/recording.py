"""Recorded references: HF's answers kept in a folder and read back, so a port is judged where HF
cannot run (a small CI machine, a device's host) and each answer is computed once.

Every question the judge asks HF goes through a function decorated with :func:`recorded` (the
masks, RoPE, forward, decode, generation and vision functions of this package). While a
:class:`Recording` is active the call is keyed by its name and a digest of its arguments (tensors by
content, a model by its fingerprint: class, config and every weight), and its answer (tensors,
tuples, lists, dicts, numbers, this package's dataclasses) is written down (``record``) or read back
(``replay``; a question the recording does not hold raises :class:`NotRecorded`). The folder holds
``answers.safetensors`` and ``manifest.json`` (:mod:`.reference_manifest`)."""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import hashlib
import importlib
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import torch

ACTIVE: contextvars.ContextVar[Recording | None] = contextvars.ContextVar("gemma4_static_recording", default=None)
_FINGERPRINTS: weakref.WeakKeyDictionary[torch.nn.Module, str] = weakref.WeakKeyDictionary()
PACKAGE = __name__.split(".")[0]


class NotRecorded(LookupError):
    """A question the active recording does not hold (the call, and why it may be missing)."""


def fingerprint(model: torch.nn.Module) -> str:
    """The sha256 of a model's class, config (as JSON) and every entry of its state dict (name,
    dtype, shape, bytes), computed once per model object."""
    known = _FINGERPRINTS.get(model)
    if known is None:
        digest = hashlib.sha256(type(model).__name__.encode())
        config = getattr(model, "config", None)
        if config is not None:
            digest.update(config.to_json_string(use_diff=False).encode())
        for name, tensor in model.state_dict().items():
            digest.update(name.encode())
            _feed_tensor(digest, tensor)
        known = _FINGERPRINTS[model] = digest.hexdigest()
    return known


def _feed_tensor(digest: Any, tensor: torch.Tensor) -> None:
    tensor = tensor.detach().cpu().contiguous()
    digest.update(f"{tensor.dtype}{tuple(tensor.shape)}".encode())
    digest.update(tensor.reshape(-1).view(torch.uint8).numpy())  # the buffer itself: a table is not copied


def digest_of(value: Any) -> str:
    """A stable sha256 of a call's arguments: tensors by dtype, shape and content, models by
    :func:`fingerprint`, configs by their JSON, dataclasses field by field; ``TypeError`` for
    anything else (a question must be keyed by what determines its answer)."""
    digest = hashlib.sha256()
    _feed(digest, value)
    return digest.hexdigest()


def _feed(digest: Any, value: Any) -> None:
    if isinstance(value, torch.Tensor):
        digest.update(b"T")
        _feed_tensor(digest, value)
    elif isinstance(value, torch.nn.Module):
        digest.update(b"M" + fingerprint(value).encode())
    elif hasattr(value, "to_json_string"):  # an HF config (a dataclass too)
        digest.update(b"C" + value.to_json_string(use_diff=False).encode())
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        digest.update(f"D{type(value).__qualname__}".encode())
        for field in dataclasses.fields(value):
            _feed(digest, (field.name, getattr(value, field.name)))
    elif isinstance(value, dict):
        digest.update(f"d{len(value)}".encode())
        for key in sorted(value, key=repr):
            _feed(digest, (key, value[key]))
    elif isinstance(value, list | tuple):
        digest.update(f"{type(value).__name__[0]}{len(value)}".encode())
        for item in value:
            _feed(digest, item)
    elif value is None or isinstance(value, str | int | float | bool | torch.dtype):
        digest.update(f"v{value!r};".encode())
    else:
        raise TypeError(f"a recorded call cannot be keyed on a {type(value).__name__}")


def pack(value: Any, tensors: dict[str, torch.Tensor], prefix: str) -> Any:
    """``value`` as JSON with its tensors moved into ``tensors`` (named ``prefix.N``); :func:`unpack`
    reverses it."""
    if isinstance(value, torch.Tensor):
        name = f"{prefix}.{len(tensors)}"
        tensors[name] = value.detach().cpu().contiguous().clone()
        return {"tensor": name}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        cls = type(value)
        if not cls.__module__.startswith(PACKAGE):
            raise TypeError(f"a recorded answer may hold {PACKAGE}'s dataclasses, not {cls.__qualname__}")
        fields = {field.name: pack(getattr(value, field.name), tensors, prefix) for field in dataclasses.fields(value)}
        return {"dataclass": f"{cls.__module__}:{cls.__qualname__}", "fields": fields}
    if isinstance(value, dict):
        return {"dict": [[pack(key, tensors, prefix), pack(item, tensors, prefix)] for key, item in value.items()]}
    if isinstance(value, list | tuple):
        return {type(value).__name__: [pack(item, tensors, prefix) for item in value]}
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    if isinstance(value, float):
        return {"float": repr(value)}  # NaN and infinities too
    if value is None or isinstance(value, str | int | bool):
        return {"value": value}
    raise TypeError(f"a recorded answer cannot hold a {type(value).__name__}")


def unpack(packed: Any, tensors: dict[str, torch.Tensor]) -> Any:
    """The value :func:`pack` turned into ``packed``, its tensors read from ``tensors``."""
    kind, content = next(iter(packed.items()))
    if kind == "tensor":
        return tensors[content].clone()  # a caller may write into what it gets
    if kind == "dataclass":
        module, _, name = content.partition(":")
        if not module.startswith(PACKAGE):
            raise ValueError(f"a recorded answer names {content!r}, not one of {PACKAGE}'s dataclasses")
        cls = functools.reduce(getattr, name.split("."), importlib.import_module(module))
        return cls(**{field: unpack(item, tensors) for field, item in packed["fields"].items()})
    if kind == "dict":
        return {unpack(key, tensors): unpack(item, tensors) for key, item in content}
    if kind in ("list", "tuple"):
        items = [unpack(item, tensors) for item in content]
        return items if kind == "list" else tuple(items)
    if kind == "dtype":
        return getattr(torch, content)
    if kind == "float":
        return float(content)
    return content


@dataclasses.dataclass
class Recording:
    """HF's answers by key: ``calls[key] = {"call": name, "answer": packed}`` and the tensors they
    name. ``mode`` is ``"record"`` (every question is computed and kept), ``"replay"`` (read back) or
    ``"live"`` (computed, only counted and timed; or, given an ``outer`` recording, passed on to it,
    which answers them as its mode says)."""

    mode: str
    calls: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    tensors: dict[str, torch.Tensor] = dataclasses.field(default_factory=dict)
    asked: int = 0  # questions asked while active (answered from the recording in replay)
    seconds: float = 0.0  # spent answering them: HF computing (record), reading back (replay)
    depth: int = 0  # recorded calls in progress (a question asked inside another is its time)
    outer: Recording | None = dataclasses.field(default=None, repr=False, compare=False)  # a live one's

    def answer(self, name: str, arguments: Any, compute: Callable[[], Any]) -> Any:
        """The answer to ``name(arguments)``: computed and kept, or read back."""
        started, self.depth = time.perf_counter(), self.depth + 1
        try:
            return self._answer(name, arguments, compute)
        finally:
            self.depth -= 1
            self.seconds += 0.0 if self.depth else time.perf_counter() - started

    def _answer(self, name: str, arguments: Any, compute: Callable[[], Any]) -> Any:
        self.asked += 1
        if self.mode == "live":
            return compute() if self.outer is None else self.outer.answer(name, arguments, compute)
        key = hashlib.sha256(f"{name}:{digest_of(arguments)}".encode()).hexdigest()
        if self.mode == "replay":
            if key not in self.calls:
                raise NotRecorded(
                    f"the reference holds no answer of HF's {name} for these arguments (key {key[:12]}): "
                    "it was recorded for other inputs; record it for this port (gemma4-static record --port NAME)"
                )
            return unpack(self.calls[key]["answer"], self.tensors)
        if key in self.calls:
            return unpack(self.calls[key]["answer"], self.tensors)
        value = compute()
        self.calls[key] = {"call": name, "answer": pack(value, self.tensors, key[:16])}
        return value

    @contextlib.contextmanager
    def active(self) -> Iterator[Recording]:
        """This recording answers (or records) every :func:`recorded` call while the block runs."""
        token = ACTIVE.set(self)
        try:
            yield self
        finally:
            ACTIVE.reset(token)


def recorded(function: Callable) -> Callable:
    """``function`` (a question to HF) answered through the active :class:`Recording`, if any."""
    name = f"{function.__module__.rpartition('.')[2]}.{function.__qualname__}"

    @functools.wraps(function)
    def asked(*args: Any, **kwargs: Any) -> Any:
        recording = ACTIVE.get()
        if recording is None:
            return function(*args, **kwargs)
        return recording.answer(name, (args, kwargs), lambda: function(*args, **kwargs))

    return asked


def answered_or_none(function: Callable, *args: Any) -> Any:
    """``function(*args)``, or ``None`` where a replayed recording does not hold it (a second
    reference the judge consults only past a tolerance, recorded only where the recording run
    consulted it)."""
    try:
        return function(*args)
    except NotRecorded:
        return None
