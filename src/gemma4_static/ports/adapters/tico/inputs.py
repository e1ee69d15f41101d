"""TICO's side of the port's boundary: its static vision profiles in the suite's terms, what its
runtime refuses (as its own checks say), the processor stand-in its ``build_static_inputs`` calls, and
its pre-negated sine tables back in HF's layout."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import torch

from ...images import ImageProfile
from ...prompt import Prompt


def tico_profiles() -> tuple[ImageProfile, ...]:
    """TICO's registered static vision profiles as the suite's :class:`ImageProfile` (its default first)."""
    from tico.quantization.wrapq.wrappers.gemma4 import static_vision_profile as profiles

    names = [profiles.DEFAULT_GEMMA4_STATIC_VISION_PROFILE]
    names += sorted(set(profiles._PROFILE_REGISTRY) - set(names))
    return tuple(_image_profile(profiles.get_gemma4_static_vision_profile(name)) for name in names)


def _image_profile(profile: Any) -> ImageProfile:
    return ImageProfile(
        name=profile.name,
        image_size=(profile.image_height, profile.image_width),
        budget=profile.max_soft_tokens,
        soft_tokens=profile.num_visual_tokens,
        slots=(profile.visual_start_idx,),
        bos=profile.tokenizer_add_bos_token,
    )


def refusal(model: Any) -> str | None:
    """Why TICO's runtime cannot take ``model`` (as its own checks say), or ``None``."""
    if getattr(model.config, "vision_config", None) is None or not hasattr(model, "get_image_features"):
        return (
            f"TICO's StaticGemma4Runtime takes a Gemma4ForConditionalGeneration with a vision tower and one image "
            f"per prompt (it has no text-only path); got {type(model).__name__}"
        )
    if model.config.get_text_config().enable_moe_block:
        return "TICO's StaticGemma4Runtime supports dense decoder layers only (assert_gemma4_e2b_no_moe)"
    from tico.quantization.wrapq.wrappers.gemma4 import static_vision_profile as profiles

    profile = profiles.get_gemma4_static_vision_profile(profiles.DEFAULT_GEMMA4_STATIC_VISION_PROFILE)
    try:
        profile.validate(vision_config=model.config.vision_config)
    except ValueError as error:
        return f"no TICO static vision profile fits the model's vision tower: {error}"
    return None


@dataclass
class PromptProcessor:
    """HF's Gemma 4 processor as TICO's runtime and flow call it, for prompts the suite has already
    tokenized: ``processor(text=KEY, images=...)`` returns the registered prompt's tensors as HF's
    processor returns them (unpadded, batch 1); its ``tokenizer`` and ``image_processor`` carry the
    fields TICO validates against its profile."""

    profile: Any
    pad_token_id: int
    prompts: dict[str, Prompt] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.tokenizer = SimpleNamespace(
            add_bos_token=self.profile.tokenizer_add_bos_token, pad_token_id=self.pad_token_id
        )
        self.image_processor = SimpleNamespace(
            patch_size=self.profile.patch_size,
            pooling_kernel_size=self.profile.pooling_kernel_size,
            max_soft_tokens=self.profile.max_soft_tokens,
        )

    def key(self, prompt: Prompt) -> str:
        """The text that stands for ``prompt`` (registered for later calls)."""
        text = f"prompt {len(self.prompts)}"
        self.prompts[text] = prompt
        return text

    def __call__(self, text: str, images: Any = None, return_tensors: str = "pt", padding: bool = False) -> dict:
        prompt = self.prompts[text]
        soft = int((prompt.mm_token_type_ids == 1).sum())
        return {
            "input_ids": prompt.input_ids,
            "attention_mask": prompt.attention_mask,
            "pixel_values": prompt.pixel_values,
            "image_position_ids": prompt.image_position_ids,
            "num_soft_tokens_per_image": torch.tensor([soft]),
        }

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return " ".join(map(str, ids))


def hf_sine(sin: torch.Tensor) -> torch.Tensor:
    """A pre-negated sine table (first half of the last axis negated) in HF's rotate-half layout."""
    first, second = sin.chunk(2, dim=-1)
    return torch.cat((-first, second), dim=-1)
