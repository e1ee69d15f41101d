"""The static layout a deployment is compiled for: length, batch, image slots and their vision
profiles, the prefill chunk and the sliding layers' cache form."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .cache import SLIDING_CACHES
from .checks import positive_int
from .schedule import expand_schedule
from .vision import VISION_PROFILES, smallest_profile


@dataclass(frozen=True)
class StaticLayout:
    """The fixed shapes a deployment is compiled for.

    ``image_slots`` are ``(start, tokens)`` pairs, in order and disjoint: image ``i`` of a row
    occupies ``[start, start + tokens)`` (a row may leave any slot to text). ``vision_profiles``
    holds each slot's soft-token budget (one of :data:`VISION_PROFILES`, at least its ``tokens``).
    ``prefill_chunk`` (``None``: single shot) must tile ``max_seq`` and keep every image slot inside
    one chunk (its tokens attend to each other bidirectionally, which a chunk cannot do across a
    later chunk). ``sliding_cache`` is the KV layout of sliding layers (``"ring"``:
    ``sliding_window`` slots; ``"full"``: ``max_seq``).
    """

    max_seq: int
    batch_size: int = 1
    image_slots: tuple[tuple[int, int], ...] = ()
    prefill_chunk: int | None = None
    vision_profiles: tuple[int, ...] = ()
    sliding_cache: str = "ring"

    def __post_init__(self) -> None:
        positive_int(self.max_seq, "max_seq")
        positive_int(self.batch_size, "batch_size")
        object.__setattr__(self, "image_slots", image_slots_argument(self.image_slots, max_seq=self.max_seq))
        object.__setattr__(self, "vision_profiles", tuple(self.vision_profiles))
        if self.prefill_chunk is not None:
            self._check_chunk()
        if self.sliding_cache not in SLIDING_CACHES:
            raise ValueError(f"sliding_cache must be one of {SLIDING_CACHES}, got {self.sliding_cache!r}")
        if len(self.vision_profiles) != len(self.image_slots):
            raise ValueError(
                f"vision_profile must give one profile per image slot ({len(self.image_slots)}), "
                f"got {self.vision_profiles!r}"
            )
        for (_, count), profile in zip(self.image_slots, self.vision_profiles, strict=True):
            if not isinstance(profile, int) or profile not in VISION_PROFILES or profile < count:
                raise ValueError(
                    f"vision_profile must be one of {VISION_PROFILES} and at least the slot's tokens={count}, "
                    f"got {profile!r}"
                )

    def _check_chunk(self) -> None:
        chunk = self.prefill_chunk
        if not isinstance(chunk, int) or isinstance(chunk, bool) or chunk < 1:
            raise ValueError(f"prefill_chunk must be a positive int or None, got {chunk!r}")
        if self.max_seq % chunk:
            raise ValueError(f"prefill_chunk={chunk} must divide max_seq={self.max_seq}")
        for first, count in self.slots_crossing(chunk):
            raise ValueError(
                f"the image slot [{first}, {first + count}) crosses a boundary of prefill_chunk={chunk}; "
                "choose the slot's start and prefill_chunk so that the image lies inside one chunk"
            )

    def slots_crossing(self, chunk: int) -> list[tuple[int, int]]:
        """The image slots ``(start, tokens)`` that chunks of ``chunk`` tokens would split."""
        return [(first, count) for first, count in self.image_slots if first // chunk != (first + count - 1) // chunk]

    def prefill_chunks(self, schedule: Any, length: int) -> list[int] | None:
        """The chunk lengths a prefill of ``length`` tokens (the longest row) runs in: ``schedule``
        expanded (:mod:`.schedule`; ``None``: the layout's ``prefill_chunk``), or ``None`` for a
        single-shot prefill. ``ValueError`` naming ``schedule`` when a chunk would split an image slot
        (its tokens attend to each other bidirectionally, which a chunk cannot do across a later one)."""
        if schedule is None:
            if self.prefill_chunk is None:
                return None
            schedule = (self.prefill_chunk,)
        chunks = expand_schedule(schedule, length)
        ends = set(itertools.accumulate(chunks))
        for first, count in self.image_slots:
            if any(first < end < first + count for end in ends):
                raise ValueError(
                    f"schedule {tuple(schedule)!r} ends a chunk inside the image slot [{first}, {first + count}): "
                    "an image must lie inside one chunk"
                )
        return chunks

    @property
    def has_image_slot(self) -> bool:
        return bool(self.image_slots)


def image_slots_argument(
    image_slots: Any,
    visual_start_idx: Any = None,
    num_visual_tokens: Any = None,
    *,
    max_seq: int | None = None,
) -> tuple[tuple[int, int], ...]:
    """The image slots a caller asked for, as ``((start, tokens), ...)``, in order, disjoint and
    inside ``max_seq``: ``image_slots`` (a sequence of ``(start, tokens)`` pairs; ``None``: none) or
    its one-slot shorthand ``visual_start_idx``/``num_visual_tokens``; errors name what was given."""
    label = "image_slots"
    if visual_start_idx is not None or num_visual_tokens is not None:
        label = "visual_start_idx/num_visual_tokens"
        if image_slots is not None:
            raise ValueError(f"give image_slots or its one-slot shorthand {label}, not both")
        if visual_start_idx is None or num_visual_tokens is None:
            raise ValueError(
                "visual_start_idx and num_visual_tokens must be given together, got "
                f"visual_start_idx={visual_start_idx!r}, num_visual_tokens={num_visual_tokens!r}"
            )
        image_slots = [(visual_start_idx, num_visual_tokens)]
    if image_slots is None:
        return ()
    if not isinstance(image_slots, Sequence) or isinstance(image_slots, str):
        raise TypeError(f"image_slots must be a sequence of (start, tokens) pairs, got {image_slots!r}")
    slots, end = [], 0
    for slot in image_slots:
        pair = isinstance(slot, Sequence) and not isinstance(slot, str) and len(slot) == 2
        if not pair or not all(isinstance(v, int) and not isinstance(v, bool) for v in slot):
            raise TypeError(f"{label} must give (start, tokens) pairs of ints, got {slot!r}")
        start, count = slot
        if start < 0 or count < 1:
            raise ValueError(f"{label}: an image slot's start must be >= 0 and its tokens >= 1, got {slot!r}")
        if start < end:
            raise ValueError(
                f"{label} must be in order and disjoint, got {list(image_slots)}: the slot starting at {start} "
                f"begins before the previous slot ends at {end}"
            )
        end = start + count
        if isinstance(max_seq, int) and end > max_seq:
            raise ValueError(f"{label}: the image slot [{start}, {end}) does not fit in max_seq={max_seq}")
        slots.append((start, count))
    return tuple(slots)


def vision_profiles_argument(vision_profile: Any, image_slots: tuple[tuple[int, int], ...]) -> tuple[int, ...]:
    """Each slot's vision profile: ``None`` (the smallest that holds the slot), one profile for every
    slot, or a sequence with one per slot (checked by :class:`StaticLayout`)."""
    if vision_profile is None:
        return tuple(smallest_profile(count) for _, count in image_slots)
    if isinstance(vision_profile, Sequence):
        return tuple(vision_profile)
    if not image_slots:
        raise ValueError(f"vision_profile={vision_profile!r} is given, but the layout has no image slot")
    return (vision_profile,) * len(image_slots)
