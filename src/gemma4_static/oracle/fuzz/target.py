"""What the fuzzer drives: a port by name on one model at one ``max_seq``, its limits (read from a
built port), a pool of built ports (one per prefill schedule: each prefill starts a new
conversation, so a port is reused), and HF's logits over a row's whole token history."""

from __future__ import annotations

import itertools
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from ...ports import Gemma4Port, PortLimits, PortSetup
from ...ports.prompt import Prompt
from ...spec import read_text_config
from ..episodes.judgement import hf_token_by_token_logits
from ..numerics.gates import quant_gate
from ..options import VerifyOptions
from ..references.streamed import streamed
from ..results import tolerances
from ..session.port_under_test import Builder, PortUnderTest, bound_builder

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
    gate: Any = None  # a low-precision profile's or integer scheme's gate: judged against ``model`` in float64
    coverage: Counter = field(default_factory=Counter)  # what the examples drew: calls, lengths, schedules

    @classmethod
    def of(cls, model: Any, options: VerifyOptions, *, build: Builder | None = None) -> FuzzTarget:
        """The target for ``options.port`` on ``model`` (its instances built with every option of the
        run bound, :class:`~..session.port_under_test.PortUnderTest`; ``build(setup)`` instead, where
        given), at ``options.max_seq`` (default: four windows and a decode past them) within its
        limits. Its limits are read from an instance built for one row (a port's limits may follow
        from how it is built: a program's chunk length), closed unused. In an integer scheme its
        instances are calibrated where the scheme is static, and judged against ``model`` in float64."""
        scheme = options.scheme
        factory = build or bound_builder(model, options)
        window = read_text_config(model.config).sliding_window
        wanted = options.max_seq or 4 * window + 8
        probe = factory(PortSetup(wanted))  # for its limits only: never called, never calibrated
        try:
            calibrates = scheme is not None and not scheme.dynamic
            under_test = PortUnderTest.of(probe, factory, model.config, calibrates=calibrates)
        finally:
            probe.close()
        if scheme is not None:  # judged against float64
            model = streamed(model)
        limits = under_test.limits
        if limits.max_seq is not None:
            wanted = min(wanted, limits.max_seq)
        batch = 1 if limits.batch.single_row else 2
        paddings = (None,) if limits.batch.padding_side is None else (limits.batch.padding_side,)
        profile = limits.images.profile if limits.images.required else None
        if profile is not None:  # its prompts: the image in its profile, then text past the window's edges
            wanted = max(wanted, limits.shortest_static_length + 4 * window + 8)
            wanted = min(wanted, limits.max_seq or wanted)
        slots = () if profile is None else profile.image_slots
        gate = None if scheme is None else quant_gate(scheme.name, options.backend)
        return cls(options.port, model, wanted, limits, under_test.build, batch, paddings, slots, gate=gate)

    @property
    def capacity(self) -> int:
        """The tokens the port holds at ``max_seq`` (one fewer where its static length counts the decode slot)."""
        return self.limits.capacity(self.max_seq)

    def covered(self, call: str, length: int | None = None, chunks: list[int] | None = None) -> None:
        """Count one call the examples made, with its prompt's length and chunks where it prefilled."""
        self.coverage[call] += 1
        if length is not None:
            self.coverage[f"length {length}"] += 1
        if chunks is not None:
            self.coverage[f"chunks {len(chunks)}{' uneven' if len(set(chunks[:-1])) > 1 else ''}"] += 1

    def coverage_summary(self) -> str:
        """What the examples covered, in a line: calls by rule, the prompt lengths and chunkings drawn."""
        counts = self.coverage
        calls = ", ".join(f"{counts[c]} {c}" for c in ("prefill", "decode", "generate", "refusal") if counts[c])
        lengths = sorted(int(key.split()[1]) for key in counts if key.startswith("length "))
        chunkings = sorted(key.removeprefix("chunks ") for key in counts if key.startswith("chunks "))
        span = f"{len(lengths)} prompt lengths in [{lengths[0]}, {lengths[-1]}]" if lengths else "no prompt"
        return f"{calls or 'no call'}; {span}; chunk counts drawn: {', '.join(chunkings) or 'none'}"

    def image_prompts(self) -> Callable[[Any, int, int], Prompt] | None:
        """A drawer of prompts in the port's image profile (``(data, rows, seed) -> Prompt``: the image,
        then a drawn number of text tokens up to its capacity), where it needs an image; else ``None``."""
        profile = self.limits.images.profile
        if not self.limits.images.required or profile is None:
            return None

        from ..references.samples import profile_prompt
        from .strategies import length_anchors, near

        room = self.capacity - profile.prefix_length
        anchors = [anchor - profile.prefix_length for anchor in length_anchors(self.window, room, self.capacity)]

        def draw(data: Any, rows: int, seed: int) -> Prompt:
            text = data.draw(near([a for a in anchors if a >= 1], 1, room), label="text after the image")
            return profile_prompt(self.model.config, profile, text, seed=seed)

        return draw

    @property
    def window(self) -> int:
        return read_text_config(self.model.config).sliding_window

    @property
    def longest_chunk(self) -> int:
        return min(self.limits.chunks.max_length or self.max_seq, self.max_seq)

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

    def token_bound(self, reference: torch.Tensor) -> torch.Tensor | float:
        """How far a token's logit may trail the reference's own choice and still be a tie: the float32
        tolerance's rule, or the profile's gate's margin."""
        return tolerances.token_bound(reference) if self.gate is None else self.gate.token_bound(reference)

    def second(self, history: Prompt) -> torch.Tensor | None:
        """HF's token-by-token logits over a text ``history`` (its second computation, asked for only
        where a port leaves the one-pass forward: :mod:`.episode`); ``None`` with images, and in a
        profile judged against float64."""
        if history.pixel_values is not None or self.gate is not None:
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
        kwargs = history.hf_kwargs()
        if history.pixel_values is not None:  # in the reference's dtype (float64 in a profile)
            kwargs["pixel_values"] = history.pixel_values.to(self.model.dtype)
        logits = self.model(**kwargs).logits[0]
        if key is not None:
            self.references[key] = logits
            while len(self.references) > REFERENCES:
                self.references.pop(next(iter(self.references)))
        return logits
