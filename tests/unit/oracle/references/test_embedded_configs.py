"""The embedded models' configs say what they claim: every field they set is one Gemma 4's config
knows (a misspelt name would be kept as an unknown attribute while HF's default built the model), and
the E2B layouts carry E2B's published values."""

from __future__ import annotations

import pytest
import torch
from transformers import Gemma4TextConfig

from gemma4_static import read_text_config
from gemma4_static.oracle.references.family import FAMILY_NAMES, GEOMETRY_NAMES, family_config
from gemma4_static.oracle.references.models import (
    E2B_VISION,
    E2B_WIDTHS,
    TINY_VISION,
    default_config,
    e2b_geometry_config,
    e2b_multimodal_config,
    e2b_real_text_config,
    e2b_text_fields,
    tiny_text_fields,
)

# google/gemma-4-E2B's config.json, text_config (the fields this project's E2B layouts set; its
# head_dim 256 and global_head_dim 512 become per-layer attributes, checked through the view)
E2B_PUBLISHED = {
    "hidden_size": 1536,
    "intermediate_size": 6144,
    "num_hidden_layers": 35,
    "num_attention_heads": 8,
    "num_key_value_heads": 1,
    "sliding_window": 512,
    "vocab_size": 262144,
    "vocab_size_per_layer_input": 262144,
    "hidden_size_per_layer_input": 256,
    "num_kv_shared_layers": 20,
    "use_double_wide_mlp": True,
    "final_logit_softcapping": 30.0,
    "max_position_embeddings": 131072,
    "rope_parameters": {
        "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0},
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
    },
}


@pytest.mark.parametrize("fields", [tiny_text_fields, e2b_text_fields], ids=["tiny", "e2b-geometry"])
def test_every_field_an_embedded_config_sets_is_one_gemma4_knows(fields):
    known = set(Gemma4TextConfig().to_dict()) | {"global_head_dim"}  # read by __post_init__ into per_layer_config
    assert set(fields()) <= known, set(fields()) - known


def test_the_e2b_layouts_carry_e2bs_published_values():
    real = e2b_real_text_config()
    assert {key: getattr(real, key) for key in E2B_PUBLISHED} == E2B_PUBLISHED
    view = read_text_config(real)  # head dims are per layer type in the config
    assert (view.spec("sliding_attention").head_dim, view.spec("full_attention").head_dim) == (256, 512)
    geometry = e2b_geometry_config()
    narrow = {key: getattr(geometry, key) for key in E2B_PUBLISHED if key not in E2B_WIDTHS}
    assert narrow == {key: value for key, value in E2B_PUBLISHED.items() if key not in E2B_WIDTHS}
    assert geometry.hidden_size < real.hidden_size and geometry.vocab_size < real.vocab_size
    assert (geometry.num_attention_heads, geometry.num_key_value_heads) == (2, 1)  # docs/models.md: 2 instead of 8


def test_the_e2b_geometry_writes_every_published_value_out():
    """Each of E2B's published values the geometry keeps is set by its fields, not left to HF's
    config defaults (today's defaults equal some of them; a default that moves would move the model)."""
    kept = set(E2B_PUBLISHED) - set(E2B_WIDTHS)
    fields = e2b_text_fields()
    assert {key: fields.get(key) for key in kept} == {key: E2B_PUBLISHED[key] for key in kept}
    narrow = {key: fields[key] for key in E2B_WIDTHS}  # docs/models.md: its widths instead of E2B's
    assert narrow == {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_attention_heads": 2,
        "vocab_size": 1024,
        "vocab_size_per_layer_input": 1024,
        "hidden_size_per_layer_input": 16,
    }


def test_the_tiny_model_is_what_its_documentation_says(tiny_model):
    """docs/models.md: 10 layers in the 4:1 pattern, 4 KV-shared layers among both layer types,
    sliding window 6, per-layer embeddings (their table over the whole vocabulary of 512, as E2B's),
    a double-wide MLP."""
    text = tiny_model.config.get_text_config()
    types = list(text.layer_types)
    assert types == (["sliding_attention"] * 4 + ["full_attention"]) * 2
    assert (text.num_kv_shared_layers, text.sliding_window, text.use_double_wide_mlp) == (4, 6, True)
    assert set(types[-4:]) == {"sliding_attention", "full_attention"} and text.hidden_size_per_layer_input > 0
    assert text.vocab_size_per_layer_input == text.vocab_size == 512


def test_e2bs_first_ten_layers_are_its_pattern_twice_with_the_last_five_reusing_kv():
    """``e2b_real_text_config(10)``: E2B's widths, 10 layers of the 4:1 pattern, the last 5 KV-shared,
    stored in bfloat16 (the real-size benchmarks' checkpoint)."""
    first_ten = e2b_real_text_config(10)
    assert first_ten.num_hidden_layers == 10 and first_ten.num_kv_shared_layers == 5
    assert list(first_ten.layer_types) == (["sliding_attention"] * 4 + ["full_attention"]) * 2
    assert (first_ten.hidden_size, first_ten.vocab_size, first_ten.dtype) == (1536, 262144, torch.bfloat16)


def test_a_real_size_layout_of_another_depth_is_refused():
    with pytest.raises(ValueError, match="layers must be 35 \\(E2B\\) or 10 \\(its first ten\\), got 36"):
        e2b_real_text_config(36)


def test_the_e2b_multimodal_model_joins_the_geometrys_decoder_and_e2bs_vision_geometry():
    """docs/models.md: E2B's vision geometry (patch 16, pooling 3, head dim 64, the 10240-entry
    position table, clipped linears) on a narrow tower, causal over image tokens as E2B is."""
    config = e2b_multimodal_config()
    vision = config.vision_config
    assert {key: getattr(vision, key) for key in E2B_VISION} == E2B_VISION
    text, geometry = config.get_text_config(), e2b_geometry_config()
    assert {key: getattr(text, key) for key in E2B_PUBLISHED} == {key: getattr(geometry, key) for key in E2B_PUBLISHED}


def test_each_embedded_name_builds_its_own_config():
    """The name a user passes (``verify --config``) picks that model's config and no other: the tiny
    model with its own vision tower, e2b-vision with E2B's on the same text decoder, the E2B layouts
    and the family geometries as their own functions write them."""
    tiny, e2b_vision = default_config("tiny"), default_config("e2b-vision")
    assert {key: getattr(tiny.vision_config, key) for key in TINY_VISION} == TINY_VISION
    assert {key: getattr(e2b_vision.vision_config, key) for key in E2B_VISION} == E2B_VISION
    tiny_text = tiny.get_text_config()  # the tiny decoder (docs/models.md: 10 layers, window 6), not HF's default
    assert (tiny_text.hidden_size, tiny_text.vocab_size, tiny_text.num_hidden_layers, tiny_text.sliding_window) == (
        64, 512, 10, 6
    )  # fmt: skip
    assert tiny.get_text_config().to_dict() == e2b_vision.get_text_config().to_dict()
    assert default_config("e2b-geometry").to_dict() == e2b_geometry_config().to_dict()
    assert default_config("e2b-multimodal").to_dict() == e2b_multimodal_config().to_dict()
    for name in FAMILY_NAMES:
        assert default_config(name).to_dict() == family_config(name).to_dict(), name
    known = set(Gemma4TextConfig().to_dict())  # a field misspelt by a geometry would be kept beside HF's default
    for name in GEOMETRY_NAMES:  # the family's geometries: Gemma 4's 5:1 pattern of sliding and full layers
        text = family_config(name)
        assert set(text.to_dict()) <= known, set(text.to_dict()) - known
        assert list(text.layer_types) == (["sliding_attention"] * 5 + ["full_attention"]) * (
            text.num_hidden_layers // 6
        )
    vision_tester = family_config("hf-vision-tester")  # HF's Vision2Text tester: the text tester's decoder
    assert vision_tester.get_text_config().to_dict() == family_config("hf-tester").to_dict()
    assert (vision_tester.get_text_config().hidden_size, vision_tester.vision_config.hidden_size) == (32, 32)
    with pytest.raises(ValueError, match=r"name must be one of .*, got 'e2b'"):
        default_config("e2b")
