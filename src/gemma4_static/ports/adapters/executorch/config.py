"""ExecuTorch's Gemma 4 example as its own export builds it: its ``Gemma4Config`` from the live HF
config object, and its weight converter kept quiet (the ExecuTorch and Qualcomm ports share them)."""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterator
from typing import Any

import torch

from ....spec import read_text_config


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


ROPE_ROW = re.compile(
    r"^(full_attention|sliding_attention) (float32|bfloat16|float16)(?: \(positions \[([\d, ]+)\]\))?"
)
ROPE_POSITIONS = 4100  # the RoPE setup's positions, [0, 4100) (PortSetup's documented contract)


def rounded_rope_reason(port: str, row: Any, rope: Any, frequencies: dict[str, torch.Tensor]) -> str | None:
    """The reason a RoPE row (prefill or decode tables) of a port that holds its RoPE ``frequencies``
    (per layer type) in a low-precision dtype fails, when the claim holds for this run: its table at
    the row's layer type, dtype and positions is the one those rounded frequencies give (angles
    ``position * inv_freq`` in float32 from the rounded ``inv_freq``, as HF's own cast model computes
    them), within the row's own gate (a rounding of its dtype); else ``None`` (the failure is the port's own)."""
    match = ROPE_ROW.match(row.check)
    if row.stage not in ("RoPE", "RoPE decode") or match is None:
        return None
    layer_type, dtype_name, listed = match.groups()
    rounded, dtype = frequencies[layer_type], getattr(torch, dtype_name)
    if rounded.dtype == torch.float32:
        return None
    positions = torch.tensor([int(p) for p in listed.split(",")]) if listed else torch.arange(ROPE_POSITIONS)
    angles = positions[:, None].float() * rounded.float()[None, :]
    angles = torch.cat((angles, angles), dim=-1)
    tables = rope(positions[None], dtype)[layer_type]
    off = max(float((table[0].float() - expected.to(dtype).float()).abs().max())
              for table, expected in zip(tables, (angles.cos(), angles.sin()), strict=True))  # fmt: skip
    if not off <= row.tolerance:
        return None
    return (
        f"{port} casts its whole model to {str(rounded.dtype).removeprefix('torch.')}, RoPE inv_freq included: its "
        f"{layer_type} table is the rounded frequencies' (to {off:.2g}), off more the further the position (as HF's "
        "own cast model)"
    )
