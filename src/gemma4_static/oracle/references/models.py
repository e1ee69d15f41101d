"""The embedded default models: small, seeded, randomly initialised Gemma 4 models that keep the
real architecture, so everything runs offline (a real checkpoint from local disk: :mod:`.checkpoints`).

- ``tiny``: a multimodal ``Gemma4ForConditionalGeneration`` (small vision tower, sliding window 6,
  KV sharing, PLE, double-wide MLP on shared layers, vision-bidirectional sliding layers); both
  layer types occur among shared and non-shared layers.
- ``e2b-vision``: the tiny text decoder with E2B's vision geometry (patch size 16, pooling kernel 3,
  head dim 64, clipped linears, a 10240-entry position table) on a narrow, 2-layer vision tower.
- ``e2b-geometry``: a text-only ``Gemma4ForCausalLM`` with E2B's 35 layers in the 4:1 pattern,
  20 KV-shared layers, head dims 256/512, window 512 and E2B's RoPE parameters; narrow hidden
  size, small vocabulary and 2 query heads instead of 8 (masks, RoPE, the layer pattern and KV
  sharing do not depend on the number of heads).
- ``e2b-multimodal``: the E2B geometry's text decoder with E2B's vision geometry in a
  ``Gemma4ForConditionalGeneration``, causal over image tokens as E2B is (its config leaves
  ``use_bidirectional_attention`` unset): the model static E2B deployments with one image in a fixed
  profile (576 x 1056 pixels, 264 soft tokens) run end to end.
- ``31b-geometry``, ``26b-a4b-geometry`` (no per-layer embeddings, K = V on full layers, the latter
  with mixture-of-experts blocks) and HF's tester configurations ``hf-tester``, ``hf-vision-tester``:
  see :mod:`.family`.
"""

from __future__ import annotations

import torch
from transformers import (
    Gemma4Config,
    Gemma4ForCausalLM,
    Gemma4ForConditionalGeneration,
    Gemma4TextConfig,
    PreTrainedModel,
)

from ...ports import PortLimits
from .family import FAMILY_NAMES, GEOMETRY_NAMES, RELEASED_ROPE_PARAMETERS, family_config
from .samples import processed_images, text_prompt
from .trained import make_text_look_trained, make_vision_look_trained

MODEL_NAMES = ("tiny", "e2b-vision", "e2b-geometry", "e2b-multimodal", *GEOMETRY_NAMES)  # what verify --config takes
BUILDABLE = (*MODEL_NAMES, *FAMILY_NAMES[len(GEOMETRY_NAMES) :])  # and HF's tester configurations
DEFAULT_SEED = 0

E2B_LAYER_TYPES = (["sliding_attention"] * 4 + ["full_attention"]) * 7
E2B_ROPE_PARAMETERS = RELEASED_ROPE_PARAMETERS


def tiny_text_fields() -> dict:
    """The tiny model's text config fields (a fresh dict, for variants of it)."""
    return {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 10,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 32,
        "global_head_dim": 64,
        "sliding_window": 6,
        "layer_types": (["sliding_attention"] * 4 + ["full_attention"]) * 2,
        "rope_parameters": E2B_ROPE_PARAMETERS,
        "vocab_size": 512,
        "vocab_size_per_layer_input": 512,
        "hidden_size_per_layer_input": 16,
        "num_kv_shared_layers": 4,
        "use_double_wide_mlp": True,
        "final_logit_softcapping": 30.0,
        "use_bidirectional_attention": "vision",
        "max_position_embeddings": 8192,
    }


TINY_VISION = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "patch_size": 4,
    "pooling_kernel_size": 2,
    "position_embedding_size": 64,
    "use_clipped_linears": True,
    "standardize": True,
}
E2B_VISION = {
    "hidden_size": 48,
    "intermediate_size": 96,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "patch_size": 16,
    "pooling_kernel_size": 3,
    "position_embedding_size": 10240,
    "use_clipped_linears": True,
    "standardize": False,
}


SPECIAL_IDS = {
    "image_token_id": 500,
    "boi_token_id": 501,
    "eoi_token_id": 502,
    "audio_token_id": 503,
    "video_token_id": 504,
    "boa_token_id": 505,
    "eoa_token_index": 506,
}


def tiny_config(vision: dict | None = None) -> Gemma4Config:
    """A small multimodal Gemma 4: 10 layers (4:1 pattern), 4 of them KV-shared, window 6, with the
    ``vision`` config fields (default: the tiny tower, clipped linears and standardization on)."""
    return Gemma4Config(text_config=tiny_text_fields(), vision_config=vision or TINY_VISION, **SPECIAL_IDS)


def e2b_multimodal_config() -> Gemma4Config:
    """The E2B geometry's text decoder with E2B's vision geometry, causal over image tokens (as E2B)."""
    return Gemma4Config(text_config=e2b_text_fields(), vision_config=E2B_VISION, **SPECIAL_IDS)


def e2b_geometry_config() -> Gemma4TextConfig:
    """E2B's layer pattern, head dims, window, RoPE and KV sharing on a narrow, cheap model."""
    return Gemma4TextConfig(**e2b_text_fields())


def e2b_text_fields() -> dict:
    """The E2B geometry's text config fields (a fresh dict)."""
    return dict(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=35,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=256,
        global_head_dim=512,
        sliding_window=512,
        layer_types=list(E2B_LAYER_TYPES),
        rope_parameters=E2B_ROPE_PARAMETERS,
        vocab_size=1024,
        vocab_size_per_layer_input=1024,
        hidden_size_per_layer_input=16,
        num_kv_shared_layers=20,
        use_double_wide_mlp=True,
        final_logit_softcapping=30.0,
        max_position_embeddings=131_072,
    )


E2B_WIDTHS = {  # E2B's real widths (the E2B geometry's are narrow): what a shipped checkpoint has
    "hidden_size": 1536,
    "intermediate_size": 6144,
    "num_attention_heads": 8,
    "vocab_size": 262_144,
    "vocab_size_per_layer_input": 262_144,
    "hidden_size_per_layer_input": 256,
}


def e2b_real_text_config(layers: int = 35) -> Gemma4TextConfig:
    """E2B's text config exactly (4.63 billion parameters), saved as bfloat16; with ``layers=10`` its
    first ten layers (the 4:1 pattern twice), the last five reusing K/V from the first five's last of
    each type, as E2B's last twenty reuse its fifteenth's."""
    if layers not in (10, 35):
        raise ValueError(f"layers must be 35 (E2B) or 10 (its first ten), got {layers!r}")
    fields = e2b_text_fields() | E2B_WIDTHS
    if layers == 10:
        fields |= {"num_hidden_layers": 10, "layer_types": list(E2B_LAYER_TYPES[:10]), "num_kv_shared_layers": 5}
    return Gemma4TextConfig(**fields, dtype="bfloat16")


DEFAULT_MODELS = ("tiny", "e2b-geometry")  # what a port is judged on by default (the CLI: the first)
PROFILE_MODELS = ("e2b-multimodal",)  # for a port that needs an image in a fixed E2B profile


def default_models(limits: PortLimits | None) -> tuple[str, ...]:
    """The embedded models a port with ``limits`` (its declared ones; ``None``: it declares none) is
    judged on by default: :data:`PROFILE_MODELS` for a port that needs an image in a fixed profile
    (the tiny models have no image it takes), else :data:`DEFAULT_MODELS`."""
    profiled = limits is not None and limits.images.required and bool(limits.images.profiles)
    return PROFILE_MODELS if profiled else DEFAULT_MODELS


def default_config(name: str) -> Gemma4Config | Gemma4TextConfig:
    """The config of one of :data:`BUILDABLE`: a multimodal :class:`Gemma4Config` or a text-only
    :class:`Gemma4TextConfig`."""
    if name not in BUILDABLE:
        raise ValueError(f"name must be one of {BUILDABLE}, got {name!r}")
    if name == "e2b-geometry":
        return e2b_geometry_config()
    if name == "e2b-multimodal":
        return e2b_multimodal_config()
    if name in FAMILY_NAMES:
        return family_config(name)
    return tiny_config(E2B_VISION if name == "e2b-vision" else None)


def build_default_model(name: str, *, seed: int = DEFAULT_SEED) -> PreTrainedModel:
    """Build one of :data:`BUILDABLE` (this module's models and :mod:`.family`'s) with seeded random
    weights made to look trained (:mod:`.trained`), in eval mode, fp32."""
    config = default_config(name)
    torch.manual_seed(seed)
    model = (Gemma4ForConditionalGeneration if isinstance(config, Gemma4Config) else Gemma4ForCausalLM)(config).eval()
    if isinstance(config, Gemma4Config):
        images = processed_images(model.config, [(48, 48), (40, 72)], seed=seed)
        make_vision_look_trained(model, images["pixel_values"], images["image_position_ids"], seed=seed)
    make_text_look_trained(model, text_prompt(model.config, [24, 24], seed=seed).input_ids, seed=seed)
    return model
