"""Property: with a window-sized ring for sliding layers, prefill (single shot or chunked) and every
decode step give the logits the max_seq layout gives, for random windows, prompt lengths, chunk
sizes and step counts; a wrong slot formula breaks it."""

from __future__ import annotations

import torch
from hypothesis import example, given
from hypothesis import strategies as st

from gemma4_static.cpu.cache import StaticKVCache
from gemma4_static.oracle.results import tolerances
from gemma4_static.runtime import StaticGemma4Runtime

MAX_SEQ = 32
WINDOWS = (1, 2, 3, 5, 8)
CHUNKS = (None, 2, 4, 8, 16)


def _decode(model, layout: str, chunk, ids: torch.Tensor, lengths: list[int], steps: int) -> torch.Tensor:
    """Logits ``(B, steps + 1, V)``: the prefill's, then each decode step's."""
    runtime = StaticGemma4Runtime(model, max_seq=MAX_SEQ, batch_size=2, prefill_chunk=chunk, sliding_cache=layout)
    mask = (torch.arange(max(lengths))[None, :] < torch.tensor(lengths)[:, None]).long()
    logits = [runtime.prefill(ids[:, : max(lengths)] * mask, mask)]
    for step in range(steps):
        logits.append(runtime.decode_one(ids[torch.arange(2), torch.tensor(lengths) + step][:, None]))
    return torch.stack(logits, dim=1)


@given(
    window=st.sampled_from(WINDOWS),
    lengths=st.lists(st.integers(1, 16), min_size=2, max_size=2),
    steps=st.integers(1, 15),
    chunk=st.sampled_from(CHUNKS),
    seed=st.integers(0, 2**16),
)
@example(window=1, lengths=[1, 16], steps=15, chunk=16, seed=0)  # a one-slot ring, a chunk of 16 slots
@example(window=5, lengths=[16, 3], steps=15, chunk=2, seed=1)  # chunks shorter than the window
def test_ring_decode_equals_full_layout_decode(models, window, lengths, steps, chunk, seed):
    ids = torch.randint(3, 400, (2, 32), generator=torch.Generator().manual_seed(seed))
    ring = _decode(models[window], "ring", chunk, ids, lengths, steps)
    full = _decode(models[window], "full", chunk, ids, lengths, steps)
    # tolerances.RELATIVE (fp32): the ring changes only which slot holds a key (summation order)
    torch.testing.assert_close(ring, full, rtol=0, atol=tolerances.relative(torch.float32, full))


def test_a_wrong_slot_formula_is_caught(models, monkeypatch):
    """Writing position p to slot (p + 1) mod R (the masks still expect p mod R) must change the logits."""
    original = StaticKVCache.slots

    def shifted(self, layer_type, positions):
        return (original(self, layer_type, positions) + self.is_ring(layer_type)) % self.capacity[layer_type]

    ids = torch.randint(3, 400, (2, 32), generator=torch.Generator().manual_seed(0))
    full = _decode(models[5], "full", None, ids, [9, 4], 10)
    monkeypatch.setattr(StaticKVCache, "slots", shifted)
    ring = _decode(models[5], "ring", None, ids, [9, 4], 10)
    assert (ring - full).abs().max() > 1e-2
