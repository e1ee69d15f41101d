"""This runtime through the port fuzzer (:mod:`gemma4_static.oracle.fuzz`, the one implementation):
hypothesis drives it through prefills of drawn lengths in drawn schedules (any chunk lengths, the
runtime's own policy, one call), right- and left-padded ragged rows, decode runs (placeholder ids
included on the image runtime), greedy generation, and the calls it must refuse (decode before a
prefill, past ``max_seq``, an id equal to the vocabulary size, a prompt past ``max_seq``), keeping its
conversation after each refusal; after every step the logits equal HF's over each row's whole token
history (HF re-run without a cache, row by row), within ``tolerances.RELATIVE`` (fp32); greedy
tokens under the token rule.

Kinds: ``text`` (ring caches), ``text-full-layout`` (``sliding_cache="full"``) and ``image`` (two
image slots of different sizes, one after BOS and one mid-prompt, each row holding 0, 1 or 2 images
and text in the slots it leaves empty)."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st

from gemma4_static.cpu.cache import StaticKVCache
from gemma4_static.oracle.fuzz import FuzzTarget, fuzz
from gemma4_static.oracle.options import VerifyOptions
from gemma4_static.oracle.references.samples import image_prompt
from gemma4_static.ports.static import StaticRuntimePort

MAX_SEQ = 16
SECOND_IMAGE = ((3, (40, 72), 70),)  # 3 text tokens after the first image, then an image of 66 soft tokens
KINDS = ("text", "text-full-layout", "image")


def _examples() -> int:
    """10 examples of up to 8 calls per kind in the dev and ci profiles (the suite's budget), 500 in
    the fuzz profile (each call re-runs HF on the whole history)."""
    return 500 if settings.default.max_examples > 60 else 10


def image_prompts(tiny_model):
    """Two rows of the image layout: each fills either slot with an image or with text, and ends
    with 0 to 3 text tokens."""

    def draw(data, batch, seed):
        after = data.draw(st.lists(st.integers(0, 3), min_size=batch, max_size=batch), label="text after")
        flags = data.draw(
            st.lists(st.tuples(st.booleans(), st.booleans()), min_size=batch, max_size=batch), label="images"
        )
        return image_prompt(tiny_model.config, text_after=after, seed=seed, with_image=flags, then=SECOND_IMAGE)

    return draw


@pytest.mark.parametrize("kind", KINDS)
def test_the_runtime_through_the_fuzzer_matches_hf(kind, targets, tiny_model):
    images = image_prompts(tiny_model) if kind == "image" else None
    result = fuzz(targets[kind], max_examples=_examples(), seed=0, images=images)
    assert result.failure is None, result.failure
    assert result.examples >= _examples()
    assert targets[kind].coverage["stage outputs compared"] > 0, result.coverage  # the intermediates judged too


def test_the_fuzzer_catches_a_wrong_decode_position(targets, monkeypatch):
    original = StaticKVCache.advance

    def off_by_one(self):
        return original(self) + (self.lengths > 4).long()  # from position 4 on, one slot too far

    monkeypatch.setattr(StaticKVCache, "advance", off_by_one)
    result = fuzz(targets["text"], max_examples=40, seed=0, shrink=False)
    assert result.failure is not None and "logits leave HF's" in result.failure


class AcceptsEverything(StaticRuntimePort):
    """Decodes before any prefill instead of refusing (an all-zero cache)."""

    def decode(self, next_ids):
        if not self.runtime.prefilled:
            return self.runtime.stages.lm_head(self.runtime.stages.embedding(next_ids))[:, 0]
        return super().decode(next_ids)


def test_the_fuzzer_catches_a_call_that_must_be_refused(tiny_model):
    build = lambda setup: AcceptsEverything(tiny_model, setup)  # noqa: E731
    target = FuzzTarget.of(tiny_model, VerifyOptions(max_seq=MAX_SEQ), build=build)
    result = fuzz(target, max_examples=5, seed=0, shrink=False)
    assert result.failure == "the port accepted a call it must refuse: decode before any prefill"
