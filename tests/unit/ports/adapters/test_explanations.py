"""Each built-in port's ``explain`` matches only the rows it is written for: a failing row of every
stage the suite reports is put to it, and the stages (and checks) it explains are exactly those its
documented divergences name; each explanation holds only while its condition does (a cast model, a
defect still reproduced, a row within its slack). The ports are not built: ``explain`` reads a few
attributes, set here as a built port holds them (the ports lane runs them built, in every group)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from gemma4_static.oracle.results.report import Row
from gemma4_static.ports.adapters.executorch import port as executorch_port
from gemma4_static.ports.adapters.executorch.config import ROPE_POSITIONS
from gemma4_static.ports.adapters.qnn import port as qnn_port

STAGES = (
    "static inputs", "token embedding", "PLE", "masks prefill", "masks decode", "masks chunk", "masks vision",
    "RoPE", "RoPE decode", "mask value", "vision prefill", "fusion", "decoder layers", "KV cache",
    "prefill logits", "chunked prefill", "decode steps", "generation", "schedules", "long positions", "fuzz",
    "conversation", "export round-trip", "quantization", "overflow", "own checks",
)  # fmt: skip
MULTIMODAL = SimpleNamespace(image_token_id=258880)  # a model config with placeholders
TEXT = SimpleNamespace()  # a text model's: no placeholder ids


def failing(stage: str, check: str = "a check", **fields) -> Row:
    return Row(stage, check, fields.pop("metric", "max abs diff"), fields.pop("value", 1.0), 1e-4, **fields)


def explained_stages(explain, **fields) -> set[str]:
    return {stage for stage in STAGES if explain(failing(stage, **fields))}


def test_a_placeholder_row_is_explained_for_a_text_decoder_on_a_multimodal_model_only():
    for port in (executorch_port, qnn_port):
        explain = port.text_decoder_placeholders
        row = failing("decode steps", "each of 3 placeholders fed as a decode input")
        assert "the text decoder alone" in explain("its port", row, MULTIMODAL)
        assert explain("its port", row, TEXT) is None
        assert explain("its port", failing("decode steps", "each of 7 special ids fed"), MULTIMODAL) is None


class BareQnn(qnn_port.QnnGemma4Port):
    """Qualcomm's port as ``explain`` reads it: its name, its model's config, its masking module."""

    def __init__(self, model_config) -> None:
        self.name, self.model_config, self.masking = "qnn-gemma4", model_config, None


@pytest.mark.parametrize("defect", ["masking_utils indexes the head axis", None])
def test_qualcomms_explanation_names_its_mask_update_defect_only_after_a_call(defect, monkeypatch):
    monkeypatch.setattr(qnn_port, "mask_update_defect", lambda masking: defect)
    port = BareQnn(TEXT)
    after_a_call = {"masks decode", "decode steps", "generation", "schedules", "fuzz"}
    assert explained_stages(port.explain) == (after_a_call if defect else set())
    assert port.explain(failing("KV cache", "K after 4 decode steps")) == defect
    assert port.explain(failing("KV cache", "K of every producing layer")) is None
    assert port.explain(failing("decoder layers", "raised", detail="IndexError in masking_utils")) == defect
    placeholders = BareQnn(MULTIMODAL).explain(failing("prefill logits", "3 placeholders at a prompt's end"))
    assert "the text decoder alone" in placeholders


class BareExecuTorch(executorch_port.ExecuTorchGemma4Port):
    """ExecuTorch's port as ``explain`` reads it: its RoPE frequencies in ``dtype`` (its whole model
    cast), and its RoPE tables those frequencies give, off by ``shift`` radians where asked."""

    def __init__(self, dtype: torch.dtype, shift: float = 0.0) -> None:
        self.name, self.model_config, self.dtype, self.shift = "executorch-gemma4", TEXT, dtype, shift
        self.frequencies = (1.0 / 10000 ** (torch.arange(0, 8, 2) / 8)).to(dtype)

    def _attention(self, layer_type: str):
        return SimpleNamespace(inv_freq=self.frequencies)

    def rope(self, position_ids: torch.Tensor, dtype: torch.dtype):
        angles = position_ids[0][:, None].float() * self.frequencies.float()[None, :] + self.shift
        angles = torch.cat((angles, angles), dim=-1)
        table = (angles.cos().to(dtype)[None], angles.sin().to(dtype)[None])
        return {"full_attention": table, "sliding_attention": table}


def rope_row(stage: str = "RoPE decode", tolerance: float = 1e-2) -> Row:
    check = "full_attention bfloat16 (positions [1, 5, 4099])"
    return Row(stage, check, "max abs diff", 0.5, tolerance)


def test_executorchs_rope_explanation_holds_only_for_its_rounded_frequencies():
    cast = BareExecuTorch(torch.bfloat16)
    assert "casts its whole model to bfloat16" in cast.explain(rope_row())
    assert "casts its whole model to bfloat16" in cast.explain(rope_row("RoPE"))
    assert cast.explain(rope_row("masks decode")) is None
    assert BareExecuTorch(torch.bfloat16, shift=0.5).explain(rope_row()) is None  # its table is not theirs
    assert BareExecuTorch(torch.float32).explain(rope_row()) is None  # nothing rounded
    assert ROPE_POSITIONS == 4100


def test_executorchs_cached_keys_are_explained_only_while_its_frequencies_are_cast():
    keys, values = failing("KV cache", "K of every producing layer"), failing("KV cache", "V of every producing layer")
    cast = BareExecuTorch(torch.bfloat16)
    assert "keys rotated by rounded frequencies" in cast.explain(keys) and cast.explain(values) is None
    assert BareExecuTorch(torch.float32).explain(keys) is None
    assert explained_stages(BareExecuTorch(torch.float32).explain) == set()
    assert explained_stages(cast.explain, check="K of layer 0") == {"KV cache"}


def test_ticos_explanations_hold_for_their_stages_and_within_their_slack():
    scope = pytest.importorskip("gemma4_static.ports.adapters.tico.scope", reason="TICO is the tico extra")
    after = set(scope.AFTER_FUSION)
    masks = lambda row: scope.explanation("tico", row, bidirectional=True, folded=False)  # noqa: E731
    assert explained_stages(masks) == {"masks vision", *after}
    folded = lambda row: scope.explanation("tico", row, bidirectional=False, folded=True)  # noqa: E731
    within, beyond = scope.FOLD_SLACK * 1e-4, 1.01 * scope.FOLD_SLACK * 1e-4
    assert explained_stages(folded, value=within) == after
    assert explained_stages(folded, value=beyond) == set()
    assert explained_stages(folded, value=within, metric="SQNR dB") == set()
    assert explained_stages(lambda row: scope.explanation("tico", row, bidirectional=False, folded=False)) == set()


@pytest.mark.parametrize("bidirectional", [True, False])
def test_ticos_port_explains_by_the_masks_of_the_model_it_was_built_on(bidirectional):
    """The port's ``explain`` passes what the built port holds: whether the model's vision masks are
    bidirectional, and whether its vision patch embedder is TICO's quantized (folded) one."""
    tico_port = pytest.importorskip("gemma4_static.ports.adapters.tico.port", reason="TICO is the tico extra")
    built = SimpleNamespace(name="tico-gemma4", bidirectional=bidirectional, _patch_embedder=lambda: object())
    explain = lambda row: tico_port.TicoGemma4Port.explain(built, row)  # noqa: E731
    assert ("masks vision" in explained_stages(explain)) == bidirectional
    if bidirectional:  # the explanation names the port it was given
        assert explain(failing("masks vision")).startswith("tico-gemma4 builds masks causal over image tokens")
