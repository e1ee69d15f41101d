"""What a port accepts (:class:`PortLimits`) and the contracts it declares where ports differ
legitimately: what its static length counts and what its greedy loop leaves in its cache. The suite
and the fuzzer build only what a port accepts and honour what it declares (a declared difference is
a rule they do not apply, never a hidden failure)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..quant.schemes import parse_scheme
from .calibration import SchemeRecipe
from .images import ImageProfile

PADDING_SIDES = ("right", "left", None)
# what a port's cache holds after its ``generate``: HF's loop feeds back every generated token but the
# last (the conversation goes on by decoding it); a terminal loop decodes the last one too
GENERATE_LEAVES = ("all but the last", "all")


@dataclass(frozen=True)
class PortLimits:
    """What a port accepts: the largest batch (``None``: any), its padding side (``"right"``,
    ``"left"`` as HF's ``padding_side="left"`` for batched generation, or ``None`` for no padding at
    all: every row as long as the longest), the largest ``max_seq`` (every setup the suite asks for
    stays within it), the dtypes it runs, whether it takes images (and needs one in every prompt;
    ``image_profiles``: the fixed static profiles it takes them in, :class:`~.images.ImageProfile`,
    the first one the suite's default; none: any size at any slot), and whether it prefills in
    chunks. The chunks it accepts: at most ``max_chunk`` tokens a call (``None``: up to ``max_seq``),
    every chunk but the last at least ``min_chunk`` and a multiple of ``chunk_multiple``;
    ``fixed_chunk``: its program takes exactly this many tokens a call (the last padded), so every
    chunk but the last is that long; ``uniform_chunks``: its program's length is set when it is built
    (from the setup's schedule), so every chunk but the last is one length. ``schemes``: the integer
    schemes it runs in its own recipe (names of :func:`~gemma4_static.quant.parse_scheme`, e.g.
    ``"8da4w+emb8"``; asked for in ``PortSetup.quant``), each judged with that scheme's gates.

    Contracts: ``reserves_decode_slot``: its static length counts the decode's current token, so a
    port built for ``max_seq`` holds ``max_seq - 1`` tokens (:meth:`capacity`); ``generate_leaves``:
    what its cache holds after :meth:`~.base.Gemma4Port.generate` (one of :data:`GENERATE_LEAVES`)."""

    max_batch: int | None = None
    padding_side: str | None = "right"
    max_seq: int | None = None
    dtypes: tuple[torch.dtype, ...] = (torch.float32,)
    images: bool = False
    needs_image: bool = False
    image_profiles: tuple[ImageProfile, ...] = ()
    chunked_prefill: bool = False
    max_chunk: int | None = None
    min_chunk: int = 1
    chunk_multiple: int = 1
    fixed_chunk: int | None = None
    uniform_chunks: bool = False
    schemes: tuple[str, ...] = ()
    recipes: tuple[SchemeRecipe, ...] = ()
    reserves_decode_slot: bool = False
    generate_leaves: str = GENERATE_LEAVES[0]

    def __post_init__(self) -> None:
        for scheme in self.schemes:
            parse_scheme(scheme)  # a ValueError naming a scheme the suite does not know
        undeclared = [recipe.scheme for recipe in self.recipes if recipe.scheme not in self.schemes]
        if undeclared:
            raise ValueError(f"recipes name schemes the port does not declare in schemes: {undeclared}")
        if self.padding_side not in PADDING_SIDES:
            raise ValueError(f"padding_side must be one of {PADDING_SIDES}, got {self.padding_side!r}")
        if self.generate_leaves not in GENERATE_LEAVES:
            raise ValueError(f"generate_leaves must be one of {GENERATE_LEAVES}, got {self.generate_leaves!r}")
        for name in ("max_batch", "max_seq", "max_chunk", "min_chunk", "chunk_multiple", "fixed_chunk"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise ValueError(f"{name} must be a positive int or None, got {value!r}")
        if self.needs_image and not self.images:
            raise ValueError("needs_image=True needs images=True: a port that needs an image takes images")
        if self.image_profiles and not self.images:
            raise ValueError("image_profiles need images=True: a port with image profiles takes images")
        if not all(isinstance(profile, ImageProfile) for profile in self.image_profiles):
            raise TypeError(f"image_profiles must hold ImageProfile values, got {self.image_profiles!r}")

    def refusal(self, chunks: list[int]) -> str | None:
        """Why the port cannot prefill in ``chunks`` (lengths in order, the whole prompt), or ``None``."""
        if len(chunks) > 1 and not self.chunked_prefill:
            return "it prefills in one call"
        body, longest = chunks[:-1], max(chunks)
        if self.max_chunk is not None and longest > self.max_chunk:
            return f"a chunk of {longest} exceeds its max_chunk {self.max_chunk}"
        if self.fixed_chunk is not None and longest > self.fixed_chunk:
            return f"a chunk of {longest} exceeds its fixed chunk {self.fixed_chunk}"
        if self.fixed_chunk is not None and any(chunk != self.fixed_chunk for chunk in body):
            return f"its program takes chunks of {self.fixed_chunk}"
        if self.uniform_chunks and (len(set(body)) > 1 or (body and chunks[-1] > body[0])):
            return "its chunks are all one length (set when it is built)"
        if any(chunk < self.min_chunk for chunk in body):
            return f"a chunk below its min_chunk {self.min_chunk}"
        if any(chunk % self.chunk_multiple for chunk in body):
            return f"a chunk that is not a multiple of {self.chunk_multiple}"
        return None

    def capacity(self, max_seq: int) -> int:
        """The tokens (prompt and decoded) a port built for ``max_seq`` holds: ``max_seq``, or one
        fewer where its static length counts the decode's current slot."""
        return max_seq - 1 if self.reserves_decode_slot else max_seq

    @property
    def single_row(self) -> bool:
        """Whether the port takes one row at a time (batch 1, or no padding to make rows one length)."""
        return self.max_batch == 1 or self.padding_side is None

    @property
    def shortest_static_length(self) -> int:
        """The shortest ``max_seq`` a setup of this port may have: one past its image profile's span
        where it needs an image in every prompt (its layout holds the image's slot), else 1."""
        profile = self.image_profile
        return profile.prefix_length + 1 if profile is not None and self.needs_image else 1

    def recipe(self, scheme: str) -> SchemeRecipe | None:
        """The port's recipe for ``scheme``, where it declares one."""
        return next((recipe for recipe in self.recipes if recipe.scheme == scheme), None)

    @property
    def image_profile(self) -> ImageProfile | None:
        """The profile the suite builds image prompts in (the first declared), ``None`` for any."""
        return self.image_profiles[0] if self.image_profiles else None
