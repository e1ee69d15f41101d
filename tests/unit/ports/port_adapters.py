"""Adapters of the kinds a team writes, for the verdict's tests: a port that exposes nothing, a
logits-only port (prefill and decode over this runtime), a batch-1 port built by a plain function,
ports that raise in their factory or in a stage; and one recording the schedules it runs (the
grid's own test)."""

from __future__ import annotations

import dataclasses
from typing import Any

from gemma4_static import StaticGemma4Runtime
from gemma4_static.oracle.faults.port_faults import WrappedRuntimePort
from gemma4_static.ports import BatchLimits, Gemma4Port, ImageLimits, PortLimits, PortPrefill, PortSetup
from gemma4_static.ports.static import StaticRuntimePort


class NothingPort(Gemma4Port):
    """Every stage raises ``NotExposed`` (the base class's default)."""

    name = "nothing"

    def __init__(self, model: Any, setup: PortSetup) -> None:
        self.setup = setup


class LogitsOnlyPort(Gemma4Port):
    """Prefill logits and decode steps over this project's runtime, nothing else; batch 1, unpadded
    (its limits are its class's, the only thing the suite may read before building it)."""

    name = "logits only"
    limits = PortLimits(batch=BatchLimits(max_batch=1, padding_side=None))

    def __init__(self, model: Any, setup: PortSetup) -> None:
        if setup.batch_size != 1:
            raise ValueError(f"{self.name} takes batch 1, got {setup}")
        self.setup = setup
        self.runtime = StaticGemma4Runtime(model, max_seq=setup.max_seq, batch_size=1)
        self.pad_token_id = model.config.get_text_config().pad_token_id

    def prefill(self, prompt: Any, *, keep_intermediates: bool = False) -> PortPrefill:
        return PortPrefill(self.runtime.prefill(self._one_text_row(prompt)))

    def decode(self, next_ids: Any) -> Any:
        return self.runtime.decode_one(next_ids)


class _UndeclaredOneRow(LogitsOnlyPort):
    name = "batch-1 port from a function"
    limits = PortLimits(batch=BatchLimits(max_batch=1, padding_side=None))


def batch_one_port(model: Any, setup: PortSetup) -> Gemma4Port:
    """A plain function: the suite cannot read limits before calling it (it has none), so it must
    build the port for one unpadded row and read the built port's limits."""
    return _UndeclaredOneRow(model, setup)


def raising_factory(model: Any, setup: PortSetup) -> Gemma4Port:
    raise ValueError("this port's weights do not load: no such tensor 'model.layers.0.q_proj.weight'")


class DecodeRaisesPort(LogitsOnlyPort):
    """Its decode raises from deep inside its own code."""

    name = "decode raises"

    def decode(self, next_ids: Any) -> Any:
        return self._kernel(next_ids)

    def _kernel(self, next_ids: Any) -> Any:
        raise RuntimeError("NPU kernel 'attention_decode' failed with status 0x12")


SCHEDULES_SEEN: list[tuple[int, list[int]]] = []  # ScheduleRecorder's prefills: (prompt length, chunks run)


class ScheduleRecorder(WrappedRuntimePort):
    """This runtime, recording each prefill's prompt length and the chunks it runs (the schedule of
    the setup it was built with, else its own policy)."""

    name = "schedule recorder"

    def prefill(self, prompt: Any, *, keep_intermediates: bool = False) -> PortPrefill:
        length = int(prompt.attention_mask.sum(dim=1).max())
        SCHEDULES_SEEN.append((length, self.inner.setup.chunks(length) or self.inner.prefill_schedule(length)))
        return super().prefill(prompt, keep_intermediates=keep_intermediates)


class ShortContextPort(WrappedRuntimePort):
    """This runtime behind a port that holds at most 64 positions."""

    name = "short context"
    limits = dataclasses.replace(WrappedRuntimePort.limits, max_seq=64)


class NeedsImageNoProfilePort(WrappedRuntimePort):
    """Needs an image in every prompt, in no declared profile: the text-only groups cannot run it."""

    name = "needs an image, no profile"
    limits = dataclasses.replace(WrappedRuntimePort.limits, images=ImageLimits(accepted=True, required=True))


class ChunksUpToSeven(WrappedRuntimePort):
    """This runtime behind a port that takes prefill chunks of at most 7 tokens."""

    name = "chunks up to 7"
    limits = dataclasses.replace(
        WrappedRuntimePort.limits, chunks=dataclasses.replace(WrappedRuntimePort.limits.chunks, max_length=7)
    )


class WrappedWithImages(WrappedRuntimePort):
    """This runtime seen from outside, taking images as it does: no stage exposed."""

    name = "wrapped with images"
    limits = dataclasses.replace(WrappedRuntimePort.limits, images=StaticRuntimePort.limits.images)
