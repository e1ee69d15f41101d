"""A stateful parity fuzzer: hypothesis drives one runtime through random sequences of prefills
(ragged, right- or left-padded, chunked or not, ring or full layout; on the image runtime two image
slots of different sizes, one after BOS and one mid-prompt, each row holding 0, 1 or 2 images and
text in the slots it leaves empty), decode steps (random ids, placeholder ids included),
greedy generation, resets and calls that must fail; after every successful step the logits equal
HF's on the same token history (HF re-run without a cache on the whole history, row by row), after
every failing call the error is a ``ValueError`` / ``TypeError`` and the runtime keeps working.

States: ``empty`` (new or reset: decode must fail), ``prefilled`` (a prompt and zero or more decode
steps in the cache), ``full`` (a row at ``max_seq``: decode must fail with "cache is full").
Tolerance: ``tolerances.RELATIVE`` (fp32), greedy tokens exactly.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from gemma4_static.cpu.cache import StaticKVCache
from gemma4_static.oracle.checks import parity, tolerances
from gemma4_static.oracle.checks.report import assert_rows_pass
from gemma4_static.oracle.references.hf import hf_last_logits
from gemma4_static.oracle.references.samples import Prompt, image_prompt, text_prompt
from gemma4_static.ports.static import StaticRuntimePort
from gemma4_static.runtime import StaticGemma4Runtime

MAX_SEQ = 16
# for the deliberately broken runtimes: stop at the first failure (no shrinking), derandomized
FAULT_HUNT = settings(stateful_step_count=12, max_examples=40, phases=[Phase.generate], derandomize=True)
KINDS = ("text", "text-chunked", "text-full-layout", "image")
SECOND_IMAGE = ((3, (40, 72), 70),)  # 3 text tokens after the first image, then an image of 66 soft tokens


@pytest.fixture(scope="module")
def machine(tiny_model):
    """The state machine class, bound to the session's tiny model and one runtime per kind."""
    image = image_prompt(tiny_model.config, text_after=[3, 3], seed=1, then=SECOND_IMAGE)
    runtimes = {
        "text": StaticGemma4Runtime(tiny_model, max_seq=MAX_SEQ, batch_size=2),
        "text-chunked": StaticGemma4Runtime(tiny_model, max_seq=MAX_SEQ, batch_size=2, prefill_chunk=4),
        "text-full-layout": StaticGemma4Runtime(tiny_model, max_seq=MAX_SEQ, batch_size=2, sliding_cache="full"),
        "image": StaticGemma4Runtime(
            tiny_model,
            max_seq=image.input_ids.shape[1] + 8,
            batch_size=2,
            prefill_chunk=None,
            image_slots=image.image_slots,
        ),
    }
    config = tiny_model.config
    # Examples share these runtimes: each starts from a real reset even while a test breaks ``reset``
    # (state leaking from one example into the next would make hypothesis's replays disagree).
    real_reset = StaticGemma4Runtime.reset
    token_ids = st.one_of(
        st.integers(3, 400), st.sampled_from([config.image_token_id, config.video_token_id, config.audio_token_id, 1])
    )

    class RuntimeMachine(RuleBasedStateMachine):
        @initialize(kind=st.sampled_from(KINDS))
        def start(self, kind):
            self.kind, self.runtime = kind, runtimes[kind]
            real_reset(self.runtime)
            self.prompt: Prompt | None = None
            self.fed = torch.zeros(2, 0, dtype=torch.long)  # tokens decoded after the prompt, per row

        def _history(self, row: int) -> Prompt:
            """Row ``row``'s prompt followed by the tokens fed since, as one batch-1 prompt. With an
            image, fed image placeholders become the pad id: HF's decode step maps them so, while its
            full forward would count them as image slots."""
            prompt, fed = self.prompt.row(row), self.fed[row : row + 1]
            if prompt.pixel_values is not None:
                fed = torch.where(fed == config.image_token_id, config.text_config.pad_token_id, fed)
            ids = torch.cat((prompt.input_ids, fed), dim=1)
            return Prompt(**{**prompt.__dict__, "input_ids": ids, "attention_mask": torch.ones_like(ids)})

        def _check(self, logits: torch.Tensor) -> None:
            for row in range(2):
                hf = hf_last_logits(tiny_model, self._history(row))
                bound = tolerances.relative(torch.float32, hf)
                error = float((logits[row] - hf).abs().max())
                assert error <= bound, f"row {row} after {self.fed.shape[1]} decode steps: {error} > {bound}"

        @rule(
            lengths=st.lists(st.integers(1, 9), min_size=2, max_size=2),
            seed=st.integers(0, 99),
            padding=st.sampled_from(["right", "left"]),
            images=st.lists(st.tuples(st.booleans(), st.booleans()), min_size=2, max_size=2),
        )
        def prefill(self, lengths, seed, padding, images):
            if self.kind == "image":  # each row fills either slot with an image or with text
                after = [length % 4 for length in lengths]
                prompt = image_prompt(config, text_after=after, seed=seed, with_image=images, then=SECOND_IMAGE)
            else:
                prompt = text_prompt(config, lengths, seed=seed)
            ids, mask = prompt.left_padded() if padding == "left" else (prompt.input_ids, prompt.attention_mask)
            logits = self.runtime.prefill(ids, mask, prompt.pixel_values, prompt.image_position_ids)
            self.prompt, self.fed = prompt, torch.zeros(2, 0, dtype=torch.long)
            self._check(logits)

        @rule(ids=st.lists(token_ids, min_size=2, max_size=2))
        def decode(self, ids):
            token = torch.tensor(ids)[:, None]
            if self.prompt is None:
                with pytest.raises(ValueError, match="needs a prefill first"):
                    self.runtime.decode_one(token)
                return
            if int(self.runtime.cache.lengths.max()) >= self.runtime.layout.max_seq:
                with pytest.raises(ValueError, match="cache is full"):
                    self.runtime.decode_one(token)
                return
            logits = self.runtime.decode_one(token)
            self.fed = torch.cat((self.fed, token), dim=1)
            self._check(logits)

        @precondition(lambda self: self.kind != "image")
        @rule(lengths=st.lists(st.integers(1, 6), min_size=2, max_size=2), new=st.integers(1, 12))
        def generate(self, lengths, new):
            prompt = text_prompt(config, lengths, seed=sum(lengths))
            if max(lengths) + new > self.runtime.layout.max_seq:
                with pytest.raises(ValueError, match="exceeds max_seq"):
                    self.runtime.generate(prompt.input_ids, prompt.attention_mask, max_new_tokens=new)
                return
            assert_rows_pass(
                parity.generation_rows(
                    tiny_model, StaticRuntimePort.around(self.runtime, tiny_model.config), prompt, max_new_tokens=new
                )
            )
            tokens = self.runtime.generate(prompt.input_ids, prompt.attention_mask, max_new_tokens=new)
            self.prompt, self.fed = prompt, tokens[:, : new - 1]  # the last token is returned, not fed

        @rule()
        def reset(self):
            self.runtime.reset()
            self.prompt, self.fed = None, torch.zeros(2, 0, dtype=torch.long)

        @rule(bad=st.sampled_from(["float ids", "wrong batch", "out of vocabulary", "3-D"]))
        def bad_decode(self, bad):
            token = {
                "float ids": torch.full((2, 1), 7.0),
                "wrong batch": torch.full((3, 1), 7),
                "out of vocabulary": torch.full((2, 1), 10**6),
                "3-D": torch.full((2, 1, 1), 7),
            }[bad]
            with pytest.raises((ValueError, TypeError), match="next_ids"):
                self.runtime.decode_one(token)

        @invariant()
        def lengths_follow_the_history(self):
            if getattr(self, "prompt", None) is not None:
                expected = self.prompt.attention_mask.sum(dim=1) + self.fed.shape[1]
                assert torch.equal(self.runtime.cache.lengths, expected)

    return RuntimeMachine


def test_runtime_state_machine_matches_hf(machine):
    """20 programs of up to 12 calls in the dev and ci profiles (the suite's budget), 500 in the fuzz
    profile (each call re-runs HF on the whole history: about 1 s a program)."""
    examples = 500 if settings.default.max_examples > 60 else 20
    run_state_machine_as_test(machine, settings=settings(stateful_step_count=12, max_examples=examples))


def test_the_machine_catches_a_wrong_decode_position(machine, monkeypatch):
    original = StaticKVCache.advance

    def off_by_one(self):
        return original(self) + (self.lengths > 4).long()  # from position 4 on, one slot too far

    monkeypatch.setattr(StaticKVCache, "advance", off_by_one)
    with pytest.raises(AssertionError):
        run_state_machine_as_test(machine, settings=FAULT_HUNT)


def test_the_machine_catches_a_stale_cache_after_reset(machine, monkeypatch):
    monkeypatch.setattr(StaticGemma4Runtime, "reset", lambda self: None)  # forgets nothing
    with pytest.raises(pytest.fail.Exception, match="DID NOT RAISE"):
        run_state_machine_as_test(machine, settings=FAULT_HUNT)
