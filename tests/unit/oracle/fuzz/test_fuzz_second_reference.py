"""The fuzzer's second reference (``FuzzTarget.second``, consulted only for a position just past the
tolerance): HF's token-by-token decode of that row's text history, asked once per history; none for
a history with images."""

from __future__ import annotations

import torch

from gemma4_static.oracle.fuzz import FuzzTarget
from gemma4_static.oracle.fuzz import target as target_module
from gemma4_static.oracle.options import VerifyOptions
from gemma4_static.oracle.references.samples import image_prompt, text_prompt


def test_the_second_reference_is_hfs_token_by_token_decode_of_the_history_asked_once(tiny_model, monkeypatch):
    target = FuzzTarget.of(tiny_model, VerifyOptions(max_seq=20))
    history = text_prompt(tiny_model.config, [9], seed=2)
    real, asked = target_module.hf_token_by_token_logits, []

    def counted(model, ids):
        asked.append(ids)
        return real(model, ids)

    monkeypatch.setattr(target_module, "hf_token_by_token_logits", counted)
    first = target.second(history)
    assert torch.equal(first, real(tiny_model, history.input_ids[0])) and target.second(history) is first
    assert len(asked) == 1 and torch.equal(asked[0], history.input_ids[0])
    other = text_prompt(tiny_model.config, [9], seed=3)  # another history: its own answer, kept beside
    assert not torch.equal(other.input_ids, history.input_ids)
    assert torch.equal(target.second(other), real(tiny_model, other.input_ids[0])) and len(asked) == 2
    assert target.second(history) is first and len(asked) == 2
    assert target.second(image_prompt(tiny_model.config, text_after=[3], seed=1)) is None
