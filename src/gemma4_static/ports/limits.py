"""What a port accepts (:class:`PortLimits`), one part per concern: the rows it takes and how they
are padded (:class:`BatchLimits`), its static length, its dtypes, the images it takes
(:class:`ImageLimits`), the chunks it prefills in (:class:`ChunkLimits`), the integer schemes it runs
in its own recipe (:class:`SchemeLimits`, :class:`SchemeRecipe`), and the contracts it declares
where ports differ legitimately (:class:`Contracts`: what its static length counts, what its greedy
loop leaves in its cache). The suite and the fuzzer build only what a port accepts and honour what
it declares (a declared difference is a rule they do not apply, never a hidden failure)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..quant.schemes import parse_scheme
from .images import ImageProfile

PADDING_SIDES = ("right", "left", None)
# what a port's cache holds after its ``generate``: HF's loop feeds back every generated token but the
# last (the conversation goes on by decoding it); a terminal loop decodes the last one too
GENERATE_LEAVES = ("all but the last", "all")
GRANULARITIES = ("per tensor", "per channel", "per group", "per token")


def _positive_or_none(owner: object, *names: str) -> None:
    """A ``ValueError`` naming the first of ``names`` on ``owner`` that is neither ``None`` nor a positive int."""
    for name in names:
        value = getattr(owner, name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise ValueError(f"{name} must be a positive int or None, got {value!r}")


@dataclass(frozen=True)
class BatchLimits:
    """The rows a port takes: at most ``max_batch`` (``None``: any), padded on ``padding_side``
    (``"right"``, ``"left"`` as HF's ``padding_side="left"`` for batched generation, or ``None``: no
    padding at all, every row as long as the longest)."""

    max_batch: int | None = None
    padding_side: str | None = "right"

    def __post_init__(self) -> None:
        _positive_or_none(self, "max_batch")
        if self.padding_side not in PADDING_SIDES:
            raise ValueError(f"padding_side must be one of {PADDING_SIDES}, got {self.padding_side!r}")

    @property
    def single_row(self) -> bool:
        """Whether the port takes one row at a time (batch 1, or no padding to make rows one length)."""
        return self.max_batch == 1 or self.padding_side is None


@dataclass(frozen=True)
class ImageLimits:
    """The images a port takes: ``accepted`` (any at all), ``required`` (one in every prompt), and
    ``profiles``: the fixed static profiles it takes them in (:class:`~.images.ImageProfile`, the
    first the suite's default; none: any size at any slot)."""

    accepted: bool = False
    required: bool = False
    profiles: tuple[ImageProfile, ...] = ()

    def __post_init__(self) -> None:
        if self.required and not self.accepted:
            raise ValueError("required=True needs accepted=True: a port that needs an image takes images")
        if self.profiles and not self.accepted:
            raise ValueError("profiles need accepted=True: a port with image profiles takes images")
        if not all(isinstance(profile, ImageProfile) for profile in self.profiles):
            raise TypeError(f"profiles must hold ImageProfile values, got {self.profiles!r}")

    @property
    def profile(self) -> ImageProfile | None:
        """The profile the suite builds image prompts in (the first declared), ``None`` for any."""
        return self.profiles[0] if self.profiles else None


@dataclass(frozen=True)
class ChunkLimits:
    """How a port prefills: in one call, or in chunks (``chunked``). The chunks it accepts: at most
    ``max_length`` tokens a call (``None``: up to ``max_seq``), every chunk but the last at least
    ``min_length`` and a multiple of ``multiple``; ``fixed``: its program takes exactly this many
    tokens a call (the last padded), so every chunk but the last is that long; ``uniform``: its
    program's length is set when it is built (from the setup's schedule), so every chunk but the last
    is one length."""

    chunked: bool = False
    max_length: int | None = None
    min_length: int = 1
    multiple: int = 1
    fixed: int | None = None
    uniform: bool = False

    def __post_init__(self) -> None:
        _positive_or_none(self, "max_length", "min_length", "multiple", "fixed")

    def refusal(self, chunks: list[int]) -> str | None:
        """Why the port cannot prefill in ``chunks`` (lengths in order, the whole prompt), or ``None``."""
        if len(chunks) > 1 and not self.chunked:
            return "it prefills in one call"
        body, longest = chunks[:-1], max(chunks)
        if self.max_length is not None and longest > self.max_length:
            return f"a chunk of {longest} exceeds its max_length {self.max_length}"
        if self.fixed is not None and longest > self.fixed:
            return f"a chunk of {longest} exceeds its fixed chunk {self.fixed}"
        if self.fixed is not None and any(chunk != self.fixed for chunk in body):
            return f"its program takes chunks of {self.fixed}"
        if self.uniform and (len(set(body)) > 1 or (body and chunks[-1] > body[0])):
            return "its chunks are all one length (set when it is built)"
        if any(chunk < self.min_length for chunk in body):
            return f"a chunk below its min_length {self.min_length}"
        if any(chunk % self.multiple for chunk in body):
            return f"a chunk that is not a multiple of {self.multiple}"
        return None


@dataclass(frozen=True)
class SchemeRecipe:
    """How a port runs suite scheme ``scheme`` (a name of :func:`~gemma4_static.quant.parse_scheme`):
    ``own_name`` its own name for the recipe; activations and weights each by bits, granularity (one
    of :data:`GRANULARITIES`) and symmetry; ``sites`` what it quantizes, in words;
    ``activation_clipping``: its activation observers clip outliers by design (a histogram or
    percentile observer), so its ranges may leave out part of what HF's forward produces."""

    scheme: str
    own_name: str
    activation_bits: int
    activation_granularity: str
    activation_symmetric: bool
    weight_bits: int
    weight_granularity: str
    weight_symmetric: bool
    sites: str = ""
    activation_clipping: bool = False

    def __post_init__(self) -> None:
        for name in ("activation_granularity", "weight_granularity"):
            if getattr(self, name) not in GRANULARITIES:
                raise ValueError(f"{name} must be one of {GRANULARITIES}, got {getattr(self, name)!r}")

    def describe(self) -> str:
        """One line: its own name, then its activations and weights."""

        def side(bits: int, granularity: str, symmetric: bool) -> str:
            return f"int{bits} {granularity}, {'symmetric' if symmetric else 'asymmetric'}"

        activations = side(self.activation_bits, self.activation_granularity, self.activation_symmetric)
        weights = side(self.weight_bits, self.weight_granularity, self.weight_symmetric)
        clipping = " (clipping observers)" if self.activation_clipping else ""
        sites = f"; {self.sites}" if self.sites else ""
        return f"{self.own_name}: activations {activations}{clipping}, weights {weights}{sites}"


@dataclass(frozen=True)
class SchemeLimits:
    """The integer schemes a port runs in its own recipe (``names`` of
    :func:`~gemma4_static.quant.parse_scheme`, e.g. ``"8da4w+emb8"``; asked for in
    ``PortSetup.quant``), each judged with that scheme's gates; ``recipes`` says how it runs each."""

    names: tuple[str, ...] = ()
    recipes: tuple[SchemeRecipe, ...] = ()

    def __post_init__(self) -> None:
        for scheme in self.names:
            parse_scheme(scheme)  # a ValueError naming a scheme the suite does not know
        undeclared = [recipe.scheme for recipe in self.recipes if recipe.scheme not in self.names]
        if undeclared:
            raise ValueError(f"recipes name schemes the port does not declare in names: {undeclared}")

    def recipe(self, scheme: str) -> SchemeRecipe | None:
        """The port's recipe for ``scheme``, where it declares one."""
        return next((recipe for recipe in self.recipes if recipe.scheme == scheme), None)


@dataclass(frozen=True)
class Contracts:
    """Where a port differs from HF legitimately, declared: ``reserves_decode_slot``: its static
    length counts the decode's current token, so a port built for ``max_seq`` holds ``max_seq - 1``
    tokens; ``generate_leaves``: what its cache holds after its ``generate`` (one of
    :data:`GENERATE_LEAVES`)."""

    reserves_decode_slot: bool = False
    generate_leaves: str = GENERATE_LEAVES[0]

    def __post_init__(self) -> None:
        if self.generate_leaves not in GENERATE_LEAVES:
            raise ValueError(f"generate_leaves must be one of {GENERATE_LEAVES}, got {self.generate_leaves!r}")


# the concerns of PortLimits, each its own type
PARTS = {
    "batch": BatchLimits,
    "images": ImageLimits,
    "chunks": ChunkLimits,
    "schemes": SchemeLimits,
    "contracts": Contracts,
}


@dataclass(frozen=True)
class PortLimits:
    """What a port accepts, by concern: ``batch`` (rows and padding), ``max_seq`` (the largest static
    length: every setup the suite asks for stays within it; ``None``: any), ``dtypes`` (the float
    profiles it runs), ``images``, ``chunks`` (its prefill), ``schemes`` (integer schemes in its own
    recipe), ``contracts`` (legitimate differences it declares) and ``bytes_per_parameter`` (the
    memory a run's instances of the port need beyond the model they are given, per parameter of that
    model, at their peak: the run's own instance and the one a group builds beside it, each with its
    own copy of the weights, a checkpoint written for its converter; 0 for a port that reads the
    model's weights; a checkpoint run's memory estimate adds it)."""

    batch: BatchLimits = field(default_factory=BatchLimits)
    max_seq: int | None = None
    dtypes: tuple[torch.dtype, ...] = (torch.float32,)
    images: ImageLimits = field(default_factory=ImageLimits)
    chunks: ChunkLimits = field(default_factory=ChunkLimits)
    schemes: SchemeLimits = field(default_factory=SchemeLimits)
    contracts: Contracts = field(default_factory=Contracts)
    bytes_per_parameter: float = 0.0

    def __post_init__(self) -> None:
        _positive_or_none(self, "max_seq")
        per_parameter = self.bytes_per_parameter
        number = isinstance(per_parameter, int | float) and not isinstance(per_parameter, bool)
        if not number or not 0 <= per_parameter <= 1e3:
            raise ValueError(f"bytes_per_parameter must be a number from 0 to 1000, got {per_parameter!r}")
        for name, expected in PARTS.items():
            if not isinstance(getattr(self, name), expected):
                raise TypeError(f"PortLimits.{name} must be a {expected.__name__}, got {getattr(self, name)!r}")
        if not self.dtypes or not all(isinstance(dtype, torch.dtype) for dtype in self.dtypes):
            raise TypeError(f"PortLimits.dtypes must be a non-empty tuple of torch dtypes, got {self.dtypes!r}")

    def capacity(self, max_seq: int) -> int:
        """The tokens (prompt and decoded) a port built for ``max_seq`` holds: ``max_seq``, or one
        fewer where its static length counts the decode's current slot."""
        return max_seq - 1 if self.contracts.reserves_decode_slot else max_seq

    @property
    def shortest_static_length(self) -> int:
        """The shortest ``max_seq`` a setup of this port may have: one past its image profile's span
        where it needs an image in every prompt (its layout holds the image's slot), else 1."""
        profile = self.images.profile
        return profile.prefix_length + 1 if profile is not None and self.images.required else 1
