"""HF's same-scheme copy calibrated under a recording: its calibration passes are HF's forward
itself, so a recording holding the float model's answers to the same prompts neither answers them
(the observers would see no row) nor keys the quantized copy's answers as the float model's."""

from __future__ import annotations

from gemma4_static.oracle.numerics.quantized import calibrated_hf
from gemma4_static.oracle.references.hf import hf_prefill
from gemma4_static.oracle.references.recording import Recording, fingerprint
from gemma4_static.oracle.references.samples import text_prompt
from gemma4_static.quant.schemes import parse_scheme


def _ranges(sites: dict) -> dict[str, tuple[float, float]]:
    return {name: (site.activation.minimum, site.activation.maximum) for name, site in sites.items() if site.activation}


def test_calibration_under_a_recording_of_the_same_prompts_observes_every_row(tiny_model):
    rows = [text_prompt(tiny_model.config, [9], seed=seed) for seed in (1, 2)]
    scheme = parse_scheme("a8w8")
    _, live = calibrated_hf(tiny_model, scheme, rows)
    recording = Recording("record")
    with recording.active():
        for row in rows:  # the float model asked first: its answers are in the recording
            hf_prefill(tiny_model, row)
        quantized, sites = calibrated_hf(tiny_model, scheme, rows)
        assert fingerprint(quantized) != fingerprint(tiny_model)  # digested once its weights are quantized
        assert hf_prefill(quantized, rows[0]).logits.ne(hf_prefill(tiny_model, rows[0]).logits).any()
    assert len(_ranges(live)) == 83 and _ranges(sites) == _ranges(live)
