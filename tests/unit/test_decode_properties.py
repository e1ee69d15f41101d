"""Property: decoding t tokens after a prompt gives the logits that a prefill of the extended prompt gives."""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from gemma4_static.oracle.results import tolerances
from gemma4_static.runtime import StaticGemma4Runtime

MAX_SEQ = 32
CHUNKS = (None, 4, 8, 16)


def _right_padded(ids: torch.Tensor, lengths: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """The first ``lengths[b]`` ids of each row, right-padded, and their mask."""
    mask = (torch.arange(max(lengths))[None, :] < torch.tensor(lengths)[:, None]).long()
    return ids[:, : max(lengths)] * mask, mask


@given(
    lengths=st.lists(st.integers(1, 14), min_size=2, max_size=2),
    steps=st.integers(1, 10),
    chunk=st.sampled_from(CHUNKS),
    seed=st.integers(0, 2**16),
)
def test_decode_step_equals_prefill_of_the_extended_prompt(runtimes, lengths, steps, chunk, seed):
    decoders, reference = runtimes
    ids = torch.randint(3, 400, (2, max(lengths) + steps), generator=torch.Generator().manual_seed(seed))
    decoder = decoders[chunk]
    decoder.prefill(*_right_padded(ids, lengths))
    for step in range(steps):
        fed = ids[torch.arange(2), torch.tensor(lengths) + step][:, None]
        decoded = decoder.decode_one(fed)
        expected = reference.prefill(*_right_padded(ids, [length + step + 1 for length in lengths]))
        # tolerances.RELATIVE (fp32, 2e-5 x max|logit|, about 6e-4 on logits of 30): prefill and decode reduce in other
        # orders (S keys vs max_seq slots), a few ulps per layer over 10 layers; any masking or
        # position slip moves logits by > 1e-2.
        torch.testing.assert_close(decoded, expected, rtol=0, atol=tolerances.relative(torch.float32, expected))


def test_in_place_decode_equals_the_stage_forward(e2b_model):
    """The PyTorch backend's decode (K/V written into the cache first, full layers attending over
    the key span only) equals each stage's own ``forward`` (the K/V placed into a copy of the whole
    cache, what an exported stage computes), ragged rows across a span boundary of 256 slots.
    Tolerance ``tolerances.RELATIVE``: the same ops, reduced over 256-multiples instead of max_seq."""
    text = e2b_model.config.get_text_config()
    ids = torch.randint(3, text.vocab_size, (2, 254), generator=torch.Generator().manual_seed(5))
    mask = (torch.arange(254)[None, :] < torch.tensor([[250], [254]])).long()
    spanned, whole = (StaticGemma4Runtime(e2b_model, max_seq=768, batch_size=2) for _ in range(2))
    whole.stack.in_place = False
    assert spanned.stack.in_place and spanned.stack.key_span(torch.tensor([[249], [253]])) == 256 < 768
    for runtime in (spanned, whole):
        runtime.prefill(ids * mask, mask)
    for step in range(8):  # both rows cross from a span of 256 into 512
        fed = torch.full((2, 1), 11 + step)
        ours, theirs = spanned.decode_one(fed), whole.decode_one(fed)
        torch.testing.assert_close(ours, theirs, rtol=0, atol=tolerances.relative(torch.float32, theirs))
    assert torch.equal(spanned.cache.lengths, torch.tensor([258, 262]))
