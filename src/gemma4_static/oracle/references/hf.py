"""Hugging Face as the oracle: adapters that ask transformers for its masks, RoPE, forward,
decode and generation and put the answer in a comparable form. Used by the parity checks, never by
the runtime.

HF may answer a mask request with ``None`` (SDPA's ``is_causal`` shortcut), a float additive mask
(eager) or a boolean mask (sdpa); :func:`expand_hf_mask` turns each into the boolean pattern it
stands for, so nothing is ever skipped.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import torch

from ...spec import text_module
from .recording import recorded

ATTN_IMPLEMENTATIONS = ("eager", "sdpa")


def expand_hf_mask(
    mask: torch.Tensor | None, batch: int, q_len: int, kv_len: int, *, causal: bool = True
) -> torch.Tensor:
    """HF's mask as a boolean ``(B, 1, Q, K)`` pattern, ``True`` = allowed.

    ``None`` means HF's attention runs without a mask, with ``is_causal = q_len > 1 and causal``
    (``causal`` is the attention module's ``is_causal``, False for
    ``use_bidirectional_attention == "all"``): upper-left causal, or every key. A float mask
    allows exactly its ``0.0`` entries.
    """
    if mask is None:
        if q_len == 1 or not causal:
            pattern = torch.ones(1, kv_len, dtype=torch.bool)
        else:
            pattern = torch.ones(q_len, kv_len, dtype=torch.bool).tril()
        return pattern.expand(batch, 1, q_len, kv_len)
    allowed = mask if mask.dtype == torch.bool else mask == 0
    return allowed.expand(batch, 1, q_len, kv_len)


def _with_attn_implementation(config: Any, attn_implementation: str) -> tuple[Any, Any]:
    """A copy of ``config`` (composite or text) using ``attn_implementation``; returns (config, text)."""
    if attn_implementation not in ATTN_IMPLEMENTATIONS:
        raise ValueError(f"attn_implementation must be one of {ATTN_IMPLEMENTATIONS}, got {attn_implementation!r}")
    config = copy.deepcopy(config)
    text = config.get_text_config()
    text._attn_implementation = attn_implementation
    if text is not config:
        config._attn_implementation = attn_implementation
    return config, text


@recorded
def hf_prefill_bool_masks(
    config: Any,
    attention_mask: torch.Tensor,
    *,
    attn_implementation: str,
    mm_token_type_ids: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """HF's prefill masks ``{layer_type: (B, 1, S, S) bool}`` for a ``(B, S)`` padding mask.

    With ``mm_token_type_ids`` the request goes through ``Gemma4ForConditionalGeneration``'s own
    ``create_masks_for_generate`` (HF's vision-bidirectional path); otherwise through
    ``masking_utils.create_masks_for_generate``.
    """
    from transformers import Gemma4ForConditionalGeneration
    from transformers.masking_utils import create_masks_for_generate

    config, text = _with_attn_implementation(config, attn_implementation)
    batch, length = attention_mask.shape
    inputs_embeds = torch.zeros(batch, length, 1)
    position_ids = torch.arange(length).expand(batch, length)
    if mm_token_type_ids is not None:
        masks = Gemma4ForConditionalGeneration.create_masks_for_generate(
            config, inputs_embeds, attention_mask, None, position_ids, mm_token_type_ids=mm_token_type_ids
        )
    else:
        masks = create_masks_for_generate(text, inputs_embeds, attention_mask, None, position_ids)
    causal = text.use_bidirectional_attention != "all"
    return {name: expand_hf_mask(mask, batch, length, length, causal=causal) for name, mask in masks.items()}


@recorded
def hf_decode_visible_positions(
    config: Any, attention_mask: torch.Tensor, *, attn_implementation: str
) -> dict[str, torch.Tensor]:
    """Which absolute positions HF lets the next token see, ``{layer_type: (B, P + 1) bool}``.

    ``attention_mask`` is ``(B, P + 1)``: ``P`` cached tokens and the new one at position ``P``.
    HF's cache is a ``DynamicCache`` filled with ``P`` placeholder keys per layer, so its sliding
    layers keep only their last ``sliding_window - 1`` keys; each mask column is mapped back to its
    absolute position through the cache's ``(kv_length, kv_offset)``.
    """
    from transformers import DynamicCache
    from transformers.masking_utils import create_masks_for_generate

    config, text = _with_attn_implementation(config, attn_implementation)
    batch, total = attention_mask.shape
    past = total - 1
    cache = DynamicCache(config=text)
    for layer_idx, layer in enumerate(cache.layers):
        if type(layer).__name__ == "DummyLayer":  # KV-shared layers hold no cache of their own
            continue
        head_dim = text.per_layer_config[layer_idx].head_dim
        placeholder = torch.zeros(batch, 1, past, head_dim)
        cache.update(placeholder, placeholder, layer_idx)
    inputs_embeds = torch.zeros(batch, 1, 1)
    position_ids = torch.full((batch, 1), past)
    masks = create_masks_for_generate(text, inputs_embeds, attention_mask, cache, position_ids)

    visible = {}
    for name, mask in masks.items():
        layer_idx = text.layer_types.index(name)
        kv_length, kv_offset = cache.get_mask_sizes(1, layer_idx)
        pattern = expand_hf_mask(mask, batch, 1, kv_length)[:, 0, 0, :]
        absolute = torch.zeros(batch, total, dtype=torch.bool)
        absolute[:, kv_offset : kv_offset + kv_length] = pattern
        visible[name] = absolute
    return visible


@recorded
def hf_rope(
    config: Any, position_ids: torch.Tensor, *, dtype: torch.dtype = torch.float32
) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """HF's ``Gemma4TextRotaryEmbedding`` output ``{layer_type: (cos, sin)}``, ``(B, S, head_dim)``."""
    from transformers.models.gemma4.modeling_gemma4 import Gemma4TextRotaryEmbedding

    text = config.get_text_config()
    rotary = Gemma4TextRotaryEmbedding(text)
    probe = torch.zeros((), dtype=dtype)
    position_ids = position_ids if position_ids.dim() == 2 else position_ids[None]
    return {layer_type: rotary(probe, position_ids, layer_type) for layer_type in sorted(set(text.layer_types))}


@dataclass(frozen=True)
class HFPrefill:
    """HF's forward on a prompt: ``logits (B, P, vocab)`` at the sequence ``positions (P,)`` kept
    (``None``: every position, ``P = S``), ``hidden_states`` as HF returns them (the embeddings,
    each layer's output, the last after the final norm) and ``last_layer``, the last layer's output
    before that norm (what a port's last hidden state is compared with)."""

    logits: torch.Tensor
    hidden_states: tuple[torch.Tensor, ...]
    last_layer: torch.Tensor
    positions: torch.Tensor | None = None

    @property
    def layer_outputs(self) -> tuple[torch.Tensor, ...]:
        """The embeddings and every layer's output, the last before the final norm."""
        return (*self.hidden_states[:-1], self.last_layer)

    def logits_at(self, rows: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """``(N, vocab)``: the logits of row ``rows[i]`` at sequence position ``positions[i]``; a
        ``ValueError`` for a position whose logits were not kept."""
        if self.positions is None:
            return self.logits[rows, positions]
        index = torch.searchsorted(self.positions, positions).clamp_max(len(self.positions) - 1)
        missing = positions[self.positions[index] != positions]
        if missing.numel():
            kept = self.positions.tolist()
            raise ValueError(f"positions {missing.tolist()} were not kept; HF's logits are kept at {kept}")
        return self.logits[rows, index]


@recorded
@torch.no_grad()
def hf_prefill(model: Any, prompt: Any, positions: torch.Tensor | None = None) -> HFPrefill:
    """HF's forward on a :class:`~gemma4_static.oracle.references.samples.Prompt` (with
    ``mm_token_type_ids`` when it has an image): its hidden states and its logits at the sorted
    sequence ``positions`` (HF's ``logits_to_keep``; default every position): :class:`HFPrefill`."""
    captured: list[torch.Tensor] = []
    hook = text_module(model).norm.register_forward_pre_hook(lambda module, args: captured.append(args[0]))
    kept = {} if positions is None else {"logits_to_keep": positions}
    try:
        output = model(**prompt.hf_kwargs(), output_hidden_states=True, use_cache=True, **kept)
    finally:
        hook.remove()
    return HFPrefill(output.logits, tuple(output.hidden_states), captured[0], positions)


def hf_last_logits(model: Any, prompt: Any) -> torch.Tensor:
    """HF's logits ``(B, vocab)`` at each row's last valid token of ``prompt`` (only those kept)."""
    last = prompt.last_index
    return hf_prefill(model, prompt, last.unique()).logits_at(torch.arange(len(last)), last)


@recorded
@torch.no_grad()
def hf_per_layer_inputs(model: Any, embeddings: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """HF's per-layer inputs ``(B, S, L, P)`` for LLM-side ``ids`` and HF's fused ``embeddings (B, S, H)``."""
    text = text_module(model)
    return text.project_per_layer_inputs(embeddings, text.get_per_layer_inputs(ids, None))


@recorded
@torch.no_grad()
def hf_input_embeddings(model: Any, ids: torch.Tensor) -> torch.Tensor:
    """HF's ``get_input_embeddings()(ids)``: ``(B, S, H)``, scaled as its embedding module scales."""
    return model.get_input_embeddings()(ids)


@recorded
@torch.no_grad()
def hf_all_logits(model: Any, prompt: Any) -> torch.Tensor:
    """HF's logits ``(B, S, vocab)`` at every position of ``prompt`` (its images too), without a cache."""
    return model(**prompt.hf_kwargs()).logits


@recorded
@torch.no_grad()
def hf_decode_logits(model: Any, prompt: Any, tokens: torch.Tensor) -> torch.Tensor:
    """HF's logits ``(B, T, vocab)`` for feeding ``tokens (B, T)`` one by one after ``prompt``, each
    row alone (batch 1, unpadded) through its own ``DynamicCache``."""
    rows = []
    for row in range(tokens.shape[0]):
        cache = model(**prompt.row(row).hf_kwargs(), use_cache=True, logits_to_keep=1).cache  # its cache only
        steps = []
        for token in tokens[row]:
            output = model(input_ids=token.view(1, 1), cache=cache, use_cache=True)
            cache = output.cache
            steps.append(output.logits[0, -1])
        rows.append(torch.stack(steps))
    return torch.stack(rows)


@torch.no_grad()
def hf_generate(model: Any, prompt: Any, *, max_new_tokens: int, eos_token_id: int | None) -> torch.Tensor:
    """HF greedy ``generate`` on each row of ``prompt`` alone: the new tokens ``(B, max_new_tokens)``,
    padded with the pad id after a stop at EOS. ``eos_token_id=None`` disables EOS (not the config's)."""
    return hf_greedy(model, prompt, max_new_tokens=max_new_tokens, eos_token_id=eos_token_id)[0]


@recorded
@torch.no_grad()
def hf_greedy(
    model: Any, prompt: Any, *, max_new_tokens: int, eos_token_id: int | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`hf_generate`'s tokens ``(B, T)`` and the logits ``(B, T, vocab)`` each token was chosen
    from (NaN after a stop at EOS): what the token rule needs to tell a decided step from a tie."""
    from transformers import GenerationConfig

    pad = model.config.get_text_config().pad_token_id
    config = GenerationConfig(
        do_sample=False,
        max_new_tokens=max_new_tokens,
        eos_token_id=eos_token_id,
        pad_token_id=pad,
        output_logits=True,
        return_dict_in_generate=True,
    )
    tokens, logits = [], []
    for row in range(prompt.input_ids.shape[0]):
        alone = prompt.row(row)
        output = model.generate(**alone.hf_kwargs(), generation_config=config)
        new = output.sequences[0, alone.input_ids.shape[1] :]
        missing = max_new_tokens - new.numel()
        tokens.append(torch.cat((new, torch.full((missing,), pad, dtype=new.dtype))))
        steps = torch.cat(output.logits)
        logits.append(torch.cat((steps, torch.full((missing, steps.shape[-1]), torch.nan, dtype=steps.dtype))))
    return torch.stack(tokens), torch.stack(logits)


def paired_hidden_states(
    ours: tuple[torch.Tensor, ...], theirs: HFPrefill, valid: torch.Tensor
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``(ours, HF)`` for the embeddings and each layer's output (the last before the final norm on
    both sides: :attr:`HFPrefill.layer_outputs`), restricted to the ``valid (B, S)`` positions."""
    length = valid.shape[1]
    pairs = zip(ours, theirs.layer_outputs, strict=True)
    return [(mine[:, :length][valid], reference[valid]) for mine, reference in pairs]
