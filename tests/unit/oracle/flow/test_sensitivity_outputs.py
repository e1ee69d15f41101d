"""What a sensitivity sweep compares with float64 for each output a port returns (the numerics and ports
lanes run real sweeps): the logits at each row's last valid token, or at the compared positions; each
hidden state at the valid positions, the last after the final norm; the per-layer inputs where the
model has them; the soft tokens where the prompt has images."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from gemma4_static.oracle.flow import sensitivity
from gemma4_static.oracle.flow.sensitivity import _reference_outputs
from gemma4_static.oracle.references.hf import HFPrefill
from gemma4_static.ports import PortPrefill

LAST_INDEX = torch.tensor([4, 2])
MASK = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])  # the second row right-padded after 3 tokens


def _session(reference: HFPrefill, *, mask: torch.Tensor = MASK, **exposed: object) -> SimpleNamespace:
    """A session over a prompt of ``mask`` whose port returns ``exposed`` (the rest ``None``) and whose
    compared positions are each row's last valid token (``session.model`` and ``config`` named)."""
    last = mask.sum(dim=1) - 1
    outputs = dict.fromkeys(("all_logits", "hidden_states", "per_layer_inputs", "soft_tokens")) | exposed
    return SimpleNamespace(
        prompt=SimpleNamespace(attention_mask=mask, last_index=last, pixel_values=None),
        reference=reference,
        ours=SimpleNamespace(**outputs),
        compared_positions=lambda: (torch.arange(mask.shape[0]), last, None),
        has_per_layer_inputs=False,
        model="the model",
        config="the config",
        reference_model="float64",
    )


def test_a_port_without_every_positions_logits_is_compared_at_each_rows_last_token():
    logits = torch.arange(2 * 5 * 3, dtype=torch.float64).reshape(2, 5, 3)
    reference = HFPrefill(logits, hidden_states=(torch.zeros(2, 5, 4),), last_layer=torch.zeros(2, 5, 4))
    outputs = _reference_outputs(_session(reference))
    assert list(outputs) == ["logits"]
    described, extract, compared = outputs["logits"]
    assert described == "logits at each row's last valid token"
    assert torch.equal(compared, torch.stack([logits[0, 4], logits[1, 2]]))
    ours = torch.ones(2, 3)
    assert extract(PortPrefill(ours)) is ours


def test_a_ports_hidden_states_are_each_compared_with_hfs_at_the_valid_positions(monkeypatch):
    """The embeddings and each layer's output as they are, the last layer's after the model's final
    norm (a port returns it before the norm, as HF's ``output_hidden_states`` keeps it)."""
    states = tuple(torch.randn(2, 5, 4, dtype=torch.float64) for _ in range(4))  # embeddings, 2 layers, final
    reference = HFPrefill(torch.zeros(2, 5, 3), hidden_states=states, last_layer=states[-1])
    monkeypatch.setattr(sensitivity, "text_module", {"the model": SimpleNamespace(norm=lambda hidden: 2 * hidden)}.get)
    outputs = _reference_outputs(_session(reference, all_logits=torch.zeros(2, 5, 3), hidden_states=(1,)))
    assert list(outputs) == ["logits", "embeddings", "last layer", "layer 0", "layer 1"]
    described, extract, compared = outputs["logits"]  # every position's logits, at the compared positions
    assert described == "logits" and torch.equal(compared, reference.logits[[0, 1], [4, 2]])
    every = torch.randn(2, 5, 3)
    assert torch.equal(extract(PortPrefill(torch.zeros(2, 3), all_logits=every)), every[[0, 1], [4, 2]])
    valid = MASK.bool()
    before_norm = (*states[:-1], states[-1] / 2)
    ours = PortPrefill(torch.zeros(2, 3), hidden_states=before_norm)
    for name, index in (("embeddings", 0), ("layer 0", 1), ("layer 1", 2), ("last layer", 3)):
        _, extract, compared = outputs[name]
        assert torch.equal(extract(ours), states[index][valid]) and torch.equal(compared, states[index][valid]), name


def test_the_per_layer_inputs_are_compared_where_the_model_has_them_and_the_port_returns_them(monkeypatch):
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    states = (torch.randn(2, 3, 4, dtype=torch.float64),)
    asked = []
    monkeypatch.setattr(sensitivity, "llm_input_ids", lambda prompt, config: asked.append(config) or "ids")
    monkeypatch.setattr(sensitivity, "hf_per_layer_inputs", lambda model, embeddings, ids: torch.ones(2, 3, 2, 5))

    def outputs(has_them: bool, returned: torch.Tensor | None) -> dict:
        reference = HFPrefill(torch.zeros(2, 3, 3), hidden_states=states, last_layer=states[0])
        session = _session(reference, mask=mask, per_layer_inputs=returned)
        session.has_per_layer_inputs = has_them
        return _reference_outputs(session)

    ple = torch.zeros(2, 3, 2, 5)
    assert "PLE" not in outputs(False, ple) and "PLE" not in outputs(True, None)
    described, extract, compared = outputs(True, ple)["PLE"]
    assert asked == ["the config"] and described == "per-layer inputs"
    assert compared.shape == (5, 2, 5) and torch.equal(
        extract(PortPrefill(torch.zeros(2, 3), per_layer_inputs=ple)), ple[mask.bool()]
    )
    static = torch.randn(2, 4, 2, 5)  # a port's per-layer inputs over its static length: the prompt's 3 read
    assert torch.equal(extract(PortPrefill(torch.zeros(2, 3), per_layer_inputs=static)), static[:, :3][mask.bool()])


def test_the_soft_tokens_are_compared_where_the_prompt_has_images_and_the_port_returns_them():
    """HF's soft tokens in float64 (``get_image_features`` of the pixels in float64), one image after
    the other, against the port's; neither side asked without images or without the port's."""
    images = [torch.randn(2, 4, dtype=torch.float64), torch.randn(3, 4, dtype=torch.float64)]
    asked = []

    def image_features(pixels: torch.Tensor, position_ids: str) -> SimpleNamespace:
        asked.append((pixels.dtype, position_ids))
        return SimpleNamespace(pooler_output=images)

    def outputs(pixels: torch.Tensor | None, soft_tokens: tuple | None) -> dict:
        reference = HFPrefill(torch.zeros(2, 5, 3), hidden_states=None, last_layer=None)
        session = _session(reference, soft_tokens=soft_tokens)
        session.prompt.pixel_values, session.prompt.image_position_ids = pixels, "positions"
        session.reference_model = SimpleNamespace(model=SimpleNamespace(get_image_features=image_features))
        return _reference_outputs(session)

    ours = (torch.ones(2, 4), torch.zeros(3, 4))
    assert "vision" not in outputs(None, ours) and "vision" not in outputs(torch.ones(1, 3), None) and not asked
    described, extract, compared = outputs(torch.ones(1, 3), ours)["vision"]
    assert described == "soft tokens" and asked == [(torch.float64, "positions")]
    assert torch.equal(compared, torch.cat(images)) and torch.equal(
        extract(PortPrefill(None, soft_tokens=ours)), torch.cat(ours)
    )
