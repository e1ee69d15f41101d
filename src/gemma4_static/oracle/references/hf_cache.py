"""HF's cache as the oracle of a port's: what HF's ``DynamicCache`` holds after a prefill (and decode
steps) of each row alone, paired with what a port's cache reports at the same absolute positions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ...spec import read_text_config
from .recording import recorded


@recorded
@torch.no_grad()
def hf_row_cache(
    model: Any, prompt: Any, row: int, tokens: torch.Tensor | None = None
) -> dict[int, tuple[torch.Tensor, torch.Tensor]]:
    """What HF's ``DynamicCache`` holds after prefilling row ``row`` of ``prompt`` alone, then
    feeding ``tokens (T,)``: ``{layer: (K, V)}`` for every layer with a cache of its own, each
    ``(kv_heads, held positions, head_dim)`` (a sliding layer holds its last ``window - 1``)."""
    # the cache, not (1, S, vocab) logits: 2.2 GB in float64 for 1,027 tokens of E2B's vocabulary
    cache = model(**prompt.row(row).hf_kwargs(), use_cache=True, logits_to_keep=1).cache
    for token in [] if tokens is None else tokens:
        cache = model(input_ids=token.view(1, 1), cache=cache, use_cache=True).cache
    sources = read_text_config(model.config).kv_sources
    return {
        index: (cache.layers[index].keys[0], cache.layers[index].values[0])
        for index, source in enumerate(sources)
        if source == index
    }


def paired_kv(
    cache_kv: Callable[[int, list[int]], dict[int, tuple[torch.Tensor, torch.Tensor]]],
    model: Any,
    prompt: Any,
    tokens: torch.Tensor | None = None,
) -> list[tuple[str, torch.Tensor, torch.Tensor]]:
    """``(name, ours, HF)`` for the K and V of every layer a port's cache reports, after a prefill of
    ``prompt`` (and decode steps ``tokens (B, T)``), over every row: HF runs each row alone, and its
    cache holds every position of a full layer and the row's last ``window - 1`` of a sliding one;
    ours is ``cache_kv(row, positions)`` at those absolute positions (a port's
    :meth:`~gemma4_static.ports.Gemma4Port.cache_kv`). Every producing layer is compared
    (one the port leaves out compares as NaN), and a KV-shared layer the port reports against its
    producer's. Each tensor is ``(kv_heads, positions of all rows, head_dim)``."""
    sources = read_text_config(model.config).kv_sources
    gathered: dict[tuple[int, str], tuple[list[torch.Tensor], list[torch.Tensor]]] = {}
    for row in range(prompt.input_ids.shape[0]):
        hf_cache = hf_row_cache(model, prompt, row, None if tokens is None else tokens[row])
        length = int(prompt.attention_mask[row].sum()) + (0 if tokens is None else tokens.shape[1])
        held = {index: keys.shape[1] for index, (keys, _) in hf_cache.items()}
        # one question per span of positions HF holds (all of them, or a sliding layer's last window - 1)
        answers = {count: cache_kv(row, list(range(length - count, length))) for count in set(held.values())}
        shared = {index for answer in answers.values() for index in answer if sources[index] != index}
        for index in sorted(set(held) | shared):
            hf_layer, span = hf_cache[sources[index]], held[sources[index]]
            pair = answers[span].get(index)
            for kind, theirs in zip("KV", hf_layer, strict=True):
                mine = torch.full_like(theirs, torch.nan) if pair is None else pair[kind == "V"]
                mine_list, reference = gathered.setdefault((index, kind), ([], []))
                mine_list.append(mine)
                reference.append(theirs)
    return [
        (f"layer {index} {kind}", torch.cat(mine, dim=1), torch.cat(reference, dim=1))
        for (index, kind), (mine, reference) in sorted(gathered.items())
    ]
