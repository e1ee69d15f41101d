"""The sample prompt a port takes and the setup it is built for, from its limits."""

from __future__ import annotations

from typing import Any

from ...ports import BatchLimits, PortLimits, PortSetup
from ...spec import read_text_config
from ..references.samples import Prompt, image_prompt, profile_prompt, text_prompt

# the seeds of what the suite draws: the sample prompt's ids and images, the decode steps' tokens, the
# chunked prefill's prompt (named in the JSON report)
SEEDS = {"sample prompt": 0, "decode tokens": 1, "chunked prompt": 3, "schedules": 5, "long positions": 7}
# what every port takes: one unpadded row of text
ONE_ROW = PortLimits(batch=BatchLimits(max_batch=1, padding_side=None))
SECOND_IMAGE = ((2, (40, 72), 70),)  # an image of another size mid-prompt: two image slots per row


def sample_prompt(config: Any, limits: PortLimits, *, seed: int = SEEDS["sample prompt"]) -> Prompt:
    """The sample prompt a port with ``limits`` takes (see :mod:`.session`: in the port's first image
    profile, one row, where it declares profiles); another ``seed``
    gives the same shape and image slots with other content. ``ValueError`` when the port needs an
    image and the model has none."""
    window = read_text_config(config).sliding_window
    has_vision = getattr(config, "vision_config", None) is not None
    if limits.images.required and not has_vision:
        raise ValueError("the port needs an image in every prompt, but the model has no vision tower")
    single, profile = limits.batch.single_row, limits.images.profile
    if limits.images.accepted and has_vision and profile is not None:  # one row, past the window as the text prompt
        return profile_prompt(config, profile, max(6, window + 3 - profile.prefix_length), seed=seed)
    if limits.images.accepted and has_vision:
        return image_prompt(config, text_after=[6] if single else [6, 2], then=SECOND_IMAGE, seed=seed)
    return text_prompt(config, [window + 3] if single else [window + 3, window // 2], seed=seed)


def sample_plan(config: Any, limits: PortLimits, steps: int, max_seq: int | None) -> tuple[Prompt, int, PortSetup]:
    """The sample prompt, the decode steps and the setup for a port with ``limits``: ``max_seq`` (by
    default the prompt plus ``steps`` plus one) within ``limits.max_seq``, the steps shortened to fit a
    port's cap; ``ValueError`` when the prompt cannot fit."""
    prompt = sample_prompt(config, limits)
    length, cap = prompt.input_ids.shape[1], limits.max_seq
    if cap is not None:
        if max_seq is not None and max_seq > cap:
            raise ValueError(f"max_seq must be at most the port's limit {cap}, got {max_seq}")
        steps = min(steps, cap - length - 1)
        if steps < 1:
            raise ValueError(f"the port takes max_seq up to {cap}, below the sample prompt of {length} tokens + 1 step")
    needed = length + steps + 1
    max_seq = needed if max_seq is None else max_seq
    if max_seq < needed:
        raise ValueError(f"max_seq must be at least {needed} for this prompt and {steps} steps, got {max_seq}")
    return prompt, steps, PortSetup(max_seq, prompt.input_ids.shape[0], prompt.image_slots)
