"""The images a port takes: any (sizes and slots as the suite chooses), or fixed static profiles.

An NPU deployment compiles its vision tower for one patch grid and fuses its soft tokens into one
fixed span of the prompt: it takes one image size, processed at one soft-token budget, at one slot.
A port says so with :class:`ImageProfile` in ``PortLimits.images.profiles``; the suite then builds
every image prompt it gives that port inside the profile (through HF's own image processor, on
synthetic images of the profile's size) instead of skipping what the port cannot take."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ImageProfile:
    """A fixed static image profile: images of ``image_size`` ``(height, width)`` pixels, processed
    at a budget of ``budget`` soft tokens (the processor's ``max_soft_tokens``), give ``soft_tokens``
    soft tokens each; image ``i`` of a prompt fills ``[slots[i], slots[i] + soft_tokens)`` (its
    ``boi`` token just before, its ``eoi`` just after; ``len(slots)`` images per prompt); ``bos``:
    whether a prompt starts with BOS (a processor whose tokenizer adds none starts with ``boi``).
    ``name`` is the port's own name for it (shown in reports)."""

    name: str
    image_size: tuple[int, int]
    budget: int
    soft_tokens: int
    slots: tuple[int, ...] = (1,)
    bos: bool = False

    def __post_init__(self) -> None:
        height, width = self.image_size
        for name, value in (("height", height), ("width", width), ("budget", self.budget)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"ImageProfile {name} must be a positive int, got {value!r}")
        if not 1 <= self.soft_tokens <= self.budget:
            raise ValueError(f"soft_tokens must be in [1, budget={self.budget}], got {self.soft_tokens!r}")
        if not self.slots:
            raise ValueError("slots must name at least one image slot, got ()")
        first = 2 if self.bos else 1  # BOS, then boi, then the first soft token
        previous_end = first - 1
        for slot in self.slots:
            if not isinstance(slot, int) or slot < previous_end + 1:
                raise ValueError(
                    f"slots must be increasing token indices, each after the previous image's eoi and its "
                    f"own boi{' and BOS' if self.bos else ''}, got {self.slots!r}"
                )
            previous_end = slot + self.soft_tokens + 1  # the eoi

    @property
    def prefix_length(self) -> int:
        """Tokens up to and including the last image's ``eoi``."""
        return self.slots[-1] + self.soft_tokens + 1

    @property
    def image_slots(self) -> tuple[tuple[int, int], ...]:
        """``((start, tokens), ...)``: the slots in :class:`~.base.PortSetup`'s form."""
        return tuple((slot, self.soft_tokens) for slot in self.slots)
