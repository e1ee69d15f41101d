"""A verification session: the model, the sample prompt, the runtime and both prefills, prepared
once and shared by every check group of :mod:`.verify`."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import torch

from ..runtime import PrefillOutputs, StaticGemma4Runtime
from ..spec import read_text_config
from .gates import GATES
from .hf import hf_prefill
from .overflow import recorded_ranges
from .samples import Prompt, image_prompt, text_prompt

LAYER_GROUP = 5  # the report shows decoder layers in groups of one 4:1 period
PROFILES = (torch.float32, *GATES)  # float32 is checked against HF float32, the others against float64


@dataclass
class Session:
    """Everything the stage checks share: the model (in the profile's dtype), the sample prompt, the
    runtime, the prefill outputs of both sides (computed once); for a low-precision profile also HF
    in float64 and its prefill (the reference). ``ranges`` collects the overflow report."""

    model: Any
    dtype: torch.dtype
    steps: int
    prompt: Prompt
    runtime: StaticGemma4Runtime
    ours: PrefillOutputs
    theirs: Any
    backend: str = "torch"
    reference_model: Any = None
    reference: Any = None
    ranges: dict[str, float] = field(default_factory=dict)

    @property
    def config(self) -> Any:
        return self.model.config

    @property
    def window(self) -> int:
        return read_text_config(self.config).sliding_window


def open_session(
    model: Any,
    *,
    dtype: torch.dtype = torch.float32,
    max_seq: int | None = None,
    steps: int | None = None,
    backend: str = "torch",
    mask_value: float | None = None,
) -> Session:
    """Prepare a verification run: a ragged batch-2 sample prompt (with one image per row on a
    multimodal model), a runtime sized for it plus ``steps`` decode steps (forbidden keys at
    ``mask_value``, default per dtype), and both prefills."""
    if dtype not in PROFILES:
        raise ValueError(f"dtype must be one of {list(PROFILES)}, got {dtype}")
    reference_model = None if dtype == torch.float32 else copy.deepcopy(model).double()
    model = model if dtype == torch.float32 else copy.deepcopy(model).to(dtype)
    window = read_text_config(model.config).sliding_window
    steps = steps if steps is not None else min(2 * window + 3, 24)
    if getattr(model.model, "vision_tower", None) is not None:
        prompt = image_prompt(model.config, text_after=[6, 2])
    else:
        prompt = text_prompt(model.config, [window + 3, window // 2])
    needed = prompt.input_ids.shape[1] + steps + 1
    max_seq = needed if max_seq is None else max_seq
    if max_seq < needed:
        raise ValueError(f"max_seq must be at least {needed} for this prompt and {steps} steps, got {max_seq}")
    batch = prompt.input_ids.shape[0]
    runtime = StaticGemma4Runtime(
        model, max_seq=max_seq, batch_size=batch, backend=backend, mask_value=mask_value, **prompt.image_slot
    )
    inputs = runtime.build_inputs(prompt.input_ids, prompt.attention_mask)
    ranges: dict[str, float] = {}
    with recorded_ranges(runtime, ranges):
        ours = runtime.prefill_outputs(inputs, prompt.pixel_values, prompt.image_position_ids, keep_intermediates=True)
    reference = None if reference_model is None else hf_prefill(reference_model, prompt)
    theirs = hf_prefill(model, prompt)
    return Session(model, dtype, steps, prompt, runtime, ours, theirs, backend, reference_model, reference, ranges)
