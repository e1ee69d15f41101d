"""The rest of the Gemma 4 family as small seeded models: the two released shapes without per-layer
embeddings (31B dense, 26B-A4B mixture of experts) and HF's own test configurations.

Geometry fixtures keep what masks, RoPE, the cache and the routing depend on (the layer pattern,
head dims, KV-head counts per layer type, K = V on full layers, RoPE, softcap, expert count and
top-k) and narrow the rest (hidden 64, vocabulary 1024, dense MLP 128, expert width 32; query
heads: as many as the sliding layers' KV heads, so full layers keep a grouped-query ratio; the
window: 64 instead of 1024, because verify's prompts cross it (window + 3 tokens, chunked 2 x
window + 3) and at 1024 the K/V of 16 heads of 256 dims over 60 layers for those prompts outgrow a
24 GiB machine; masks and the ring are checked at windows 6 and 512 on the other fixtures). Sources of the kept
numbers: the released checkpoints' metadata (GGUF ``gemma4.*`` keys as ollama lists them for
``gemma4:31b`` and ``gemma4:26b-a4b``: block count, KV heads, key lengths 256/512, window 1024,
RoPE bases 1e4/1e6, softcap 30, expert count 128, experts used 8), the 31B ``config.json`` (the
5:1 layer pattern, ``attention_k_eq_v``, ``hidden_size_per_layer_input = 0``), and transformers'
own configuration code (``Gemma4TextConfig``: the 5:1 default pattern, proportional RoPE with
factor 0.25; its expert-parallel plan notes ``num_global_key_value_heads = 2`` for 26B-A4B).

HF's tester configurations: ``Gemma4TextModelTester`` and ``Gemma4Vision2TextModelTester`` of
transformers' ``tests/models/gemma4/test_modeling_gemma4.py`` on top of ``CausalLMModelTester``'s
defaults (``tests/causal_lm_tester.py``), transcribed here because the test suite is not part of
the wheel: 4 layers (sliding, full, sliding, full), 2 of them KV-shared, head dim 16 on both layer
types, PLE of width 16, a MoE block in every layer (8 experts, top 2, width 16), vision-bidirectional
attention, no final softcap; the vision tester's tower takes 20 patches of 5 x 5 pixels.
"""

from __future__ import annotations

from transformers import Gemma4Config, Gemma4TextConfig

# Every released Gemma 4 (E2B to 31B): default RoPE on sliding layers, proportional on full ones.
RELEASED_ROPE_PARAMETERS = {
    "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1_000_000.0},
    "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
}
FIVE_TO_ONE = ["sliding_attention"] * 5 + ["full_attention"]
NARROW = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "vocab_size": 1024,
    "head_dim": 256,
    "global_head_dim": 512,
    "sliding_window": 64,  # released: 1024 (see the module docstring)
    "rope_parameters": RELEASED_ROPE_PARAMETERS,
    "final_logit_softcapping": 30.0,
    "use_bidirectional_attention": "vision",
    "hidden_size_per_layer_input": 0,
    "attention_k_eq_v": True,
    "max_position_embeddings": 262_144,
}
GEOMETRIES = {
    # 31B: 60 layers, 32 query / 16 KV heads on sliding layers, 4 KV heads on full layers.
    "31b-geometry": {"num_hidden_layers": 60, "num_attention_heads": 16, "num_key_value_heads": 16,
                     "num_global_key_value_heads": 4},
    # 26B-A4B: 30 layers, 16 query / 8 KV heads, 2 on full layers; 128 experts, top 8 (width 704).
    "26b-a4b-geometry": {"num_hidden_layers": 30, "num_attention_heads": 8, "num_key_value_heads": 8,
                         "num_global_key_value_heads": 2, "enable_moe_block": True, "num_experts": 128,
                         "top_k_experts": 8, "moe_intermediate_size": 32},
}  # fmt: skip
GEOMETRY_NAMES = tuple(GEOMETRIES)

TESTER_TEXT = {
    "vocab_size": 99,
    "hidden_size": 32,
    "num_hidden_layers": 4,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "intermediate_size": 37,
    "max_position_embeddings": 512,
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "head_dim": 16,
    "global_head_dim": 16,
    "layer_types": ["sliding_attention", "full_attention"] * 2,
    "num_kv_shared_layers": 2,
    "vocab_size_per_layer_input": 99,
    "hidden_size_per_layer_input": 16,
    "enable_moe_block": True,
    "moe_intermediate_size": 16,
    "top_k_experts": 2,
    "num_experts": 8,
    "use_bidirectional_attention": "vision",
}
TESTER_VISION = {
    "hidden_size": 32,
    "num_key_value_heads": 1,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 37,
    "patch_size": 5,
    "pooling_kernel_size": 2,
}
TESTER_SPECIAL_TOKENS = {
    "image_token_id": 4,
    "boi_token_id": 5,
    "eoi_token_id": 6,
    "video_token_id": 7,
    "audio_token_id": 8,
    "mm_tokens_per_image": 2,
}
TESTER_PATCHES = 20  # the vision tester's image_size: patches per image


def geometry_config(name: str) -> Gemma4TextConfig:
    """The text config of one of :data:`GEOMETRY_NAMES`."""
    fields = {**NARROW, **GEOMETRIES[name]}
    fields["layer_types"] = FIVE_TO_ONE * (fields["num_hidden_layers"] // len(FIVE_TO_ONE))
    return Gemma4TextConfig(**fields)


def tester_text_config() -> Gemma4TextConfig:
    """HF's ``Gemma4TextModelTester`` configuration."""
    return Gemma4TextConfig(**TESTER_TEXT)


def tester_vision_config() -> Gemma4Config:
    """HF's ``Gemma4Vision2TextModelTester`` configuration (its text config is the text tester's)."""
    return Gemma4Config(text_config=tester_text_config(), vision_config=dict(TESTER_VISION), **TESTER_SPECIAL_TOKENS)


def family_config(name: str) -> Gemma4TextConfig | Gemma4Config:
    """The config of one of :data:`FAMILY_NAMES`."""
    if name == "hf-tester":
        return tester_text_config()
    if name == "hf-vision-tester":
        return tester_vision_config()
    return geometry_config(name)


FAMILY_NAMES = (*GEOMETRY_NAMES, "hf-tester", "hf-vision-tester")
