"""The whole text model as one program step whose KV cache lives inside it: token embedding,
per-layer inputs, every decoder layer over K/V buffers the program owns and updates in place,
final norm and LM head.

A step takes ``S`` tokens (a prefill chunk, or ``S = 1`` for decode), embeddings that replace some
tokens' own (an image's soft tokens, fused on the CPU side or by the vision stages) and what the
CPU side owns: their positions, the additive masks per layer type and the cache slots their K/V go to. Buffers
hold one slot more than the layer type keeps (``capacity + 1``): slot ``capacity`` is the bin
for K/V that must not be kept (padding, or positions a ring would overwrite in the same step);
no query sees it. Layer types that keep ``max_seq`` slots write first and attend over the whole
buffer in place, the bin's column masked. Ring layer types (fewer slots) attend over ``[ring |
this step's K/V]`` and are written after the last layer, so a step longer than the ring never
overwrites keys its own queries still need (the mask decides, from the positions each key holds);
a one-token step (decode) writes first instead, as its one key overwrites only a position that
left the window (a ring holds the window), and attends over the buffer in place, its mask's step
column moved to the slot written. No cache is sliced or concatenated in decode: a backend that
copies slices (XNNPACK) does not copy the cache for them. Layers that reuse another layer's K/V
write nothing, so they run on each row's last token only (all tokens when tracing every layer's
output).
"""

from __future__ import annotations

import torch
from torch import nn

from ..npu.decoder import DecoderLayer
from ..npu.embedding import NoPerLayerInputs, PerLayerInputs, TokenEmbedding
from ..npu.lm_head import LMHead


class CachedStack(nn.Module):
    """``forward(input_ids (B, S), embeddings (B, S, H), embedded (B, S, 1), positions (B, S),
    last_index (B,), *masks, *slots)`` -> logits ``(B, vocab)`` at ``last_index``. A token whose
    ``embedded`` is ``1.0`` enters as its row of ``embeddings``, one with ``0.0`` as its token's
    embedding (exactly either: a blend by 0 and 1). One mask and one slot tensor per entry of
    ``layer_types`` (their order): ``masks[t]`` ``(B, 1, S, K_t)`` additive (``0.0`` = allowed;
    ``K_t = max_seq``, or ``capacity + S`` on a ring), ``slots[t]`` ``(B, S)`` long (``capacity`` =
    not kept). With ``trace`` it also returns every layer's input and output ``(L + 1, B, S, H)``.

    ``cos``/``sin`` are ``{layer_type: (max_seq, head_dim)}`` RoPE tables; ``capacities`` the slots
    kept per layer type; ``sources[i]`` the layer whose K/V layer ``i`` attends over; ``fill`` the masks'
    additive value of a forbidden key (the bin's column)."""

    def __init__(
        self,
        embedding: TokenEmbedding,
        per_layer_inputs: PerLayerInputs | NoPerLayerInputs,
        layers: tuple[DecoderLayer, ...],
        lm_head: LMHead,
        *,
        layer_types: tuple[str, ...],
        sources: tuple[int, ...],
        capacities: dict[str, int],
        rope: dict[str, tuple[torch.Tensor, torch.Tensor]],
        batch_size: int,
        max_seq: int,
        fill: float,
        trace: bool = False,
    ) -> None:
        super().__init__()
        self.embedding, self.per_layer_inputs, self.lm_head = embedding, per_layer_inputs, lm_head
        self.layers = nn.ModuleList(layers)
        self.layer_types, self.sources, self.capacities = layer_types, sources, capacities
        self.type_order = tuple(dict.fromkeys(layer_types))
        self.max_seq, self.fill, self.trace = max_seq, fill, trace
        reusing = [index for index, source in enumerate(sources) if source != index]
        self.first_reusing_layer = reusing[0] if reusing else len(layers)
        for name, (cos, sin) in rope.items():
            self.register_buffer(f"cos_{name}", cos[:max_seq].contiguous(), persistent=False)
            self.register_buffer(f"sin_{name}", sin[:max_seq].contiguous(), persistent=False)
        dtype = embedding.weight.dtype
        self.shapes = {}
        for index, layer in enumerate(layers):
            if sources[index] == index:
                shape = (batch_size, layer.num_kv_heads, capacities[layer_types[index]] + 1, layer.head_dim)
                self.shapes[index] = shape
                flat = (shape[0] * shape[1] * shape[2], shape[3])  # written by a 1-D row index (in place)
                self.register_buffer(f"k_cache_{index}", torch.zeros(flat, dtype=dtype))
                self.register_buffer(f"v_cache_{index}", torch.zeros(flat, dtype=dtype))

    def is_ring(self, layer_type: str) -> bool:
        return self.capacities[layer_type] < self.max_seq

    def in_place(self, layer_type: str, one_token: bool) -> bool:
        """Whether ``layer_type`` writes this step's K/V first and attends over its buffer in place (every
        layer type that keeps ``max_seq`` slots; a ring in a one-token step), else over ``[ring | step]``
        with the ring written after the last layer."""
        return one_token or not self.is_ring(layer_type)

    def caches(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Producing layer ``index``'s K/V buffers viewed as ``(B, kv_heads, capacity + 1, D)`` (they are
        stored as ``(B * kv_heads * (capacity + 1), D)``)."""
        shape = self.shapes[index]
        return getattr(self, f"k_cache_{index}").view(shape), getattr(self, f"v_cache_{index}").view(shape)

    def forward(
        self,
        input_ids: torch.Tensor,
        embeddings: torch.Tensor,
        embedded: torch.Tensor,
        positions: torch.Tensor,
        last_index: torch.Tensor,
        *masks_and_slots: torch.Tensor,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        count = len(self.type_order)
        one_token = input_ids.shape[1] == 1
        slots = dict(zip(self.type_order, masks_and_slots[count:], strict=True))
        masks = {
            name: self._over_buffer(name, mask, slots[name], one_token)
            for name, mask in zip(self.type_order, masks_and_slots[:count], strict=True)
        }
        hidden = self.embedding(input_ids) * (1.0 - embedded) + embeddings * embedded
        states = [hidden]
        per_layer_inputs = self.per_layer_inputs(input_ids, hidden)
        rope = {
            name: (
                nn.functional.embedding(positions, getattr(self, f"cos_{name}")),
                nn.functional.embedding(positions, getattr(self, f"sin_{name}")),
            )
            for name in self.type_order
        }
        rows_of: dict[tuple[str, tuple[int, ...]], torch.Tensor] = {}  # (layer type, buffer shape) -> rows
        produced: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        for index, layer in enumerate(self.layers):
            layer_type, source = self.layer_types[index], self.sources[index]
            if index == self.first_reusing_layer and not self.trace and input_ids.shape[1] > 1:
                # layers that reuse K/V write nothing: past the producers only each row's last token matters
                # (a one-token step holds only that token: gathering it would be operators for nothing)
                hidden, per_layer_inputs = _rows(hidden, last_index, 1), _rows(per_layer_inputs, last_index, 1)
                rope = {name: tuple(_rows(table, last_index, 1) for table in pair) for name, pair in rope.items()}
                masks = {name: _rows(mask, last_index, 2) for name, mask in masks.items()}
                last_index = torch.zeros_like(last_index)
            query, key, value = layer.attention_inputs(hidden, *rope[layer_type])
            in_place = self.in_place(layer_type, one_token)
            if source == index:
                produced[index] = (key, value)
                if in_place:
                    self._write(index, key, value, self._rows_at(rows_of, index, slots[layer_type]))
            keys, values = self.caches(source)
            if not in_place:
                step_key, step_value = produced[source]
                capacity = self.capacities[layer_type]
                keys = torch.cat((keys[:, :, :capacity], step_key), dim=2)
                values = torch.cat((values[:, :, :capacity], step_value), dim=2)
            hidden = layer.attend_and_feed_forward(
                hidden, per_layer_inputs[:, :, index], query, keys, values, masks[layer_type]
            )
            states.append(hidden)
        for index, (key, value) in produced.items():  # ring writes after every layer has read the ring
            if not self.in_place(self.layer_types[index], one_token):
                self._write(index, key, value, self._rows_at(rows_of, index, slots[self.layer_types[index]]))
        last = hidden.gather(1, last_index[:, None, None].expand(-1, 1, hidden.shape[-1]))
        logits = self.lm_head(last)[:, 0]
        return (logits, torch.stack(states)) if self.trace else logits

    def _over_buffer(self, layer_type: str, mask: torch.Tensor, slots: torch.Tensor, one_token: bool) -> torch.Tensor:
        """``mask (B, 1, S, K)`` as the keys this layer type attends over: a buffer in place ``(B, 1, S,
        capacity + 1)``, the bin's column ``fill`` (a ring in a one-token step: its ``[ring | step]``
        mask with the step's column at the slot written, ``slots (B, 1)``); a ring in a longer step
        keeps ``[ring | step]``."""
        if not self.in_place(layer_type, one_token):
            return mask
        if not self.is_ring(layer_type):
            return nn.functional.pad(mask, (0, 1), value=self.fill)
        capacity = self.capacities[layer_type]
        over_ring = nn.functional.pad(mask[..., :capacity], (0, 1), value=self.fill)
        written = torch.arange(capacity + 1) == slots[:, None, :, None]  # (B, 1, 1, capacity + 1)
        return torch.where(written, mask[..., capacity:], over_ring)

    def _rows_at(self, rows_of: dict, index: int, slots: torch.Tensor) -> torch.Tensor:
        """The rows of producing layer ``index``'s flat buffers that ``slots (B, S)`` name, ``(B * kv_heads
        * S,)`` in the order of its K/V ``(B, kv_heads, S, D)``: computed once per layer type and buffer
        shape in a step (in a program, each is a chain of operators left to the portable kernels)."""
        batch, heads, slot_count, _ = self.shapes[index]
        key = (self.layer_types[index], (batch, heads, slot_count))
        if key not in rows_of:
            rows = torch.arange(batch)[:, None, None] * heads + torch.arange(heads)[None, :, None]
            rows_of[key] = (rows * slot_count + slots[:, None, :]).reshape(-1)
        return rows_of[key]

    def _write(self, index: int, key: torch.Tensor, value: torch.Tensor, rows: torch.Tensor) -> None:
        """``key``/``value`` ``(B, kv_heads, S, D)`` into producing layer ``index``'s buffers at ``rows``
        (:meth:`_rows_at`), in place: ``index_put_`` with one 1-D row index into the flat buffer (the
        form ExecuTorch's portable kernel writes in place on a mutable buffer)."""
        head_dim = self.shapes[index][3]
        for name, step in (("k_cache", key), ("v_cache", value)):
            getattr(self, f"{name}_{index}").index_put_((rows,), step.reshape(-1, head_dim))


def _rows(tensor: torch.Tensor, index: torch.Tensor, dim: int) -> torch.Tensor:
    """``tensor`` at one position per batch row along ``dim`` (``index (B,)``), that dim kept as 1."""
    shape = list(tensor.shape)
    shape[dim] = 1
    return tensor.gather(dim, index.view(-1, *([1] * (tensor.dim() - 1))).expand(shape))
