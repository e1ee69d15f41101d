"""What the fuzzer drives: a port by name on one model at one ``max_seq``, its limits (read from a
built port), a pool of built ports (one per prefill schedule: each prefill starts a new
conversation, so a port is reused), and HF's logits over a row's whole token history."""

from __future__ import annotations

import functools
import itertools
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from ...ports.base import Gemma4Port, PortLimits, PortSetup
from ...ports.prompt import Prompt
from ...spec import read_text_config
from ..flow.port_calls import make_port
from .episode import hf_token_by_token_logits

POOL = 6  # built ports kept at once (the least recently used is closed)
REFERENCES = 4096  # HF logits of text histories remembered (the oldest forgotten first)


@dataclass
class FuzzTarget:
    """A port ``name`` on ``model`` at ``max_seq`` with batch ``batch`` (2 ragged rows where its limits
    allow, else 1), the padding sides to draw (``paddings``), and image slots where prompts carry images
    (``image_slots``, empty for text). ``keeps_conversation``: a refused call leaves the port's
    conversation as it was (else the fuzzer starts a new one after a refusal)."""

    name: str
    model: Any
    max_seq: int
    limits: PortLimits
    build: Callable[[PortSetup], Gemma4Port]
    batch: int = 1
    paddings: tuple[str | None, ...] = ("right",)
    image_slots: tuple[tuple[int, int], ...] = ()
    keeps_conversation: bool = False
    pool: OrderedDict = field(default_factory=OrderedDict)
    references: dict[tuple, torch.Tensor] = field(default_factory=dict)
    examples: int = 0  # examples started so far
    first_failure: tuple[int, float] | None = None  # (examples, seconds) when the first one failed
    started: float = field(default_factory=time.perf_counter)

    @classmethod
    def of(
        cls, name: str, model: Any, *, max_seq: int | None = None, build: Callable | None = None, **options: Any
    ) -> FuzzTarget:
        """The target for port ``name`` (built by ``build(setup)``, by default the registry's factory
        with ``options``): its limits read from a port built for one row, ``max_seq`` (default: four
        windows and a decode past them) within them."""
        build = build or functools.partial(make_port, name, model, **options)
        window = read_text_config(model.config).sliding_window
        wanted = max_seq or 4 * window + 8
        probe = build(PortSetup(wanted))
        try:
            limits = probe.limits
        finally:
            probe.close()
        if limits.max_seq is not None:
            wanted = min(wanted, limits.max_seq)
        batch = 1 if limits.single_row else 2
        paddings = (None,) if limits.padding_side is None else (limits.padding_side,)
        return cls(name, model, wanted, limits, build, batch, paddings)

    @property
    def window(self) -> int:
        return read_text_config(self.model.config).sliding_window

    @property
    def longest_chunk(self) -> int:
        return min(self.limits.max_chunk or self.max_seq, self.max_seq)

    @property
    def vocab_size(self) -> int:
        return self.model.config.get_text_config().vocab_size

    def splits_an_image(self, chunks: list[int]) -> bool:
        """Whether a chunk of ``chunks`` ends inside an image slot (its tokens attend to each other
        bidirectionally: an image lies inside one chunk)."""
        ends = list(itertools.accumulate(chunks))
        return any(first < end < first + count for first, count in self.image_slots for end in ends)

    def setup(self, schedule: tuple[int, ...] | None) -> PortSetup:
        return PortSetup(self.max_seq, self.batch, self.image_slots, prefill_schedule=schedule)

    def port(self, schedule: tuple[int, ...] | None) -> Gemma4Port:
        """A built port for ``schedule`` (from the pool, else built and pooled)."""
        if schedule in self.pool:
            self.pool.move_to_end(schedule)
            return self.pool[schedule]
        port = self.build(self.setup(schedule))
        self.pool[schedule] = port
        if len(self.pool) > POOL:
            self.pool.popitem(last=False)[1].close()
        return port

    def close(self) -> None:
        for port in self.pool.values():
            port.close()
        self.pool.clear()

    def second(self, history: Prompt) -> torch.Tensor | None:
        """HF's token-by-token logits over a text ``history`` (its second computation, asked for only
        where a port leaves the one-pass forward: :mod:`.episode`); ``None`` with images."""
        if history.pixel_values is not None:
            return None
        key = ("token by token", *history.input_ids[0].tolist())
        if key not in self.references:
            self.references[key] = hf_token_by_token_logits(self.model, history.input_ids[0])
        return self.references[key]

    @torch.no_grad()
    def reference(self, history: Prompt) -> torch.Tensor:
        """HF's logits ``(N, vocab)`` at every position of one row's ``history`` (batch 1, no padding,
        no cache; with its images), remembered for text histories (shrinking replays the same ones)."""
        key = tuple(history.input_ids[0].tolist()) if history.pixel_values is None else None
        if key is not None and key in self.references:
            return self.references[key]
        logits = self.model(**history.hf_kwargs()).logits[0]
        if key is not None:
            self.references[key] = logits
            while len(self.references) > REFERENCES:
                self.references.pop(next(iter(self.references)))
        return logits
