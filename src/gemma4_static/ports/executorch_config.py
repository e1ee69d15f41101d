"""ExecuTorch's Gemma 4 example as its own export builds it: its ``Gemma4Config`` from the live HF
config object, and its weight converter kept quiet (the ExecuTorch and Qualcomm ports share them)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

from ..spec import read_text_config


def executorch_config(model: Any, max_seq: int) -> Any:
    """ExecuTorch's ``Gemma4Config`` for an HF Gemma 4 model, read from the live config object."""
    from executorch.examples.models.gemma4.text_decoder import Gemma4Config

    text = model.config.get_text_config()
    view = read_text_config(text)
    full, sliding = view.spec("full_attention"), view.spec("sliding_attention")
    first_sliding = text.per_layer_config[view.layer_types.index("sliding_attention")]
    return Gemma4Config(
        hidden_size=text.hidden_size,
        num_hidden_layers=text.num_hidden_layers,
        num_attention_heads=text.num_attention_heads,
        num_key_value_heads=sliding.num_kv_heads,
        head_dim=sliding.head_dim,
        global_head_dim=full.head_dim,
        vocab_size=text.vocab_size,
        intermediate_size=first_sliding.intermediate_size,
        use_double_wide_mlp=text.use_double_wide_mlp,
        rms_norm_eps=text.rms_norm_eps,
        rope_theta=full.rope.theta,
        rope_local_base_freq=sliding.rope.theta,
        partial_rotary_factor=full.rope.partial_rotary_factor,
        sliding_window=view.sliding_window,
        layer_types=list(view.layer_types),
        final_logit_softcapping=text.final_logit_softcapping or 0.0,
        hidden_size_per_layer_input=text.hidden_size_per_layer_input,
        vocab_size_per_layer_input=text.vocab_size_per_layer_input,
        num_kv_shared_layers=text.num_kv_shared_layers,
        tie_word_embeddings=True,
        max_seq_len=max_seq,
        max_context_len=max_seq,
        use_custom_sdpa=False,
    )


@contextlib.contextmanager
def quiet_converter() -> Iterator[None]:
    """The upstream converter logs a warning per key it does not map (every vision weight of a
    multimodal checkpoint); those stay out of the report while it runs."""
    converter = logging.getLogger("executorch.examples.models.gemma4.text_decoder.convert_weights")
    level = converter.level
    converter.setLevel(logging.ERROR)
    try:
        yield
    finally:
        converter.setLevel(level)


def text_decoder_placeholders(port: str, row: Any, model_config: Any) -> str | None:
    """The reason a text-decoder port's placeholder rows fail on a multimodal model, or ``None``: its
    ``Gemma4ForCausalLM`` embeds a multimodal model's image, video and audio placeholder ids as
    themselves, which HF's multimodal forward maps to the pad id (out of a text port's scope)."""
    if "placeholders" not in row.check or getattr(model_config, "image_token_id", None) is None:
        return None
    return (
        f"{port} is the text decoder alone (its Gemma4ForCausalLM): a multimodal model's placeholder ids reach "
        "its embedding as themselves, where HF's multimodal forward maps them to the pad id"
    )
