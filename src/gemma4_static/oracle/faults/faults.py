"""Porting bugs injected into the runtime in-process, and the patch makers the catalogue
(:mod:`.catalogue`) builds them from.

Each :class:`Fault` replaces one or more attributes of the runtime's modules (``unittest.mock``,
no source edits) while it is active; the self-test (:mod:`.self_test`) runs every parity check
under each fault and reports which checks caught it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from unittest import mock

import torch

from ...cpu import masks, prefill_masks, rope
from ...cpu import vision as cpu_vision

# (object, attribute, make): while a fault is active, ``object.attribute`` is ``make(original)``
Patch = tuple[Any, str, Callable[[Any], Any]]


@dataclass(frozen=True)
class Fault:
    """One porting bug: its name, what goes wrong, and the patches that inject it."""

    name: str
    bug: str
    patches: tuple[Patch, ...]
    needs_vision: bool = False  # only a model with a vision tower (and image prompts) can show it
    needs_text: str | None = None  # a text-config flag the model must have (enable_moe_block, attention_k_eq_v)
    # why a low-precision profile (bf16, fp16, an integer scheme) cannot resolve it (checked in float32 only)
    float32_only: str | None = None
    # why only an integer profile can show it (a fault of the fake quantization itself)
    needs_quant: str | None = None
    # why the bug shows as the port raising (a shape its tensors cannot take), or None: a silent wrong
    # answer, which only a comparison that fails catches
    raises: str | None = None

    def not_applicable(self, model: Any, dtype: torch.dtype, quant: str | None = None) -> str | None:
        """Why this fault cannot show on ``model`` in profile ``dtype`` (or integer scheme ``quant``), or ``None``."""
        if self.needs_vision and getattr(model.model, "vision_tower", None) is None:
            return "the model has no vision tower"
        if self.needs_text is not None and not getattr(model.config.get_text_config(), self.needs_text, False):
            return f"the model has no {self.needs_text}"
        if self.needs_quant is not None and quant is None:
            return self.needs_quant
        if self.float32_only is not None and (dtype != torch.float32 or quant is not None):
            return f"below {quant or str(dtype).removeprefix('torch.')}'s resolution: {self.float32_only}"
        return None

    @contextlib.contextmanager
    def injected(self) -> Iterator[None]:
        """The runtime with this bug while the block runs (tables cached under it are dropped)."""
        with contextlib.ExitStack() as stack:
            for target, attribute, make in self.patches:
                stack.enter_context(mock.patch.object(target, attribute, make(getattr(target, attribute))))
            clear_cached_tables()
            try:
                yield
            finally:
                clear_cached_tables()


def clear_cached_tables() -> None:
    """Forget the mask, RoPE and vision tables cached per spec (they may hold a fault's values)."""
    cached_tables = (
        masks.mask_table,
        masks.additive_rules,
        prefill_masks.seeing_rows,
        rope._cached_table,
        cpu_vision._axis_tables,
    )
    for cached in cached_tables:
        cached.cache_clear()


def after_init(cls: type, tweak: Callable[[Any], None]) -> Patch:
    """Patch ``cls.__init__`` so that ``tweak(instance)`` runs after it."""

    def make(original: Callable) -> Callable:
        def init(self: Any, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            tweak(self)

        return init

    return (cls, "__init__", make)


def setting(attribute: str, value: Callable[[Any], Any]) -> Callable[[Any], None]:
    return lambda instance: setattr(instance, attribute, value(instance))


def with_argument(index: int, shift: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[Callable], Callable]:
    """Call the original with positional argument ``index`` transformed by ``shift``."""

    def make(original: Callable) -> Callable:
        def call(*args: Any, **kwargs: Any) -> Any:
            args = (*args[:index], shift(args[index]), *args[index + 1 :])
            return original(*args, **kwargs)

        return call

    return make
