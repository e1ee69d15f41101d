"""Which group breaks under an integer scheme: the sample prompt prefilled with one group quantized
and the rest in float (``only``), and with every group quantized but one (``all but``), each
against HF in float64 at the group's own output and at the logits of every valid position.

A group's output: the embeddings (after fusion) for ``embedding``, the per-layer inputs for
``PLE``, the soft tokens for ``vision``, layer ``i``'s hidden states for ``layer i``, the last
layer's hidden states for a projection kind across layers, the logits for ``LM head``. The sweep
reuses the session's calibration (every range observed once, in float, as a deployment calibrates),
so a group's figures differ from the full profile's by that group's error alone.

Another port in its own recipe is swept through its switches
(:meth:`~gemma4_static.ports.Gemma4Port.quantization_groups`, ``quantize_groups``), at the
outputs it exposes (its logits at each row's last valid token where it has no logits of every
position; a group's own output where the port returns it, else the logits)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ...ports import PortPrefill
from ...spec import text_module
from ..checks.parity import llm_input_ids
from ..numerics.metrics import Metrics, kl_divergence, measure
from ..options import VerifyOptions
from ..references.hf import hf_per_layer_inputs
from ..session.session import Session, open_session

MODES = ("only", "all but")
# a group's output where its name is not an output's: the other groups' own, or the last layer
OUTPUTS = {"embedding": "embeddings", "tables": "embeddings", "PLE projection": "PLE", "LM head": "logits"}


@dataclass(frozen=True)
class GroupResult:
    """One configuration of the sweep: ``group`` quantized alone (``only``) or left in float (``all
    but``); ``output`` names where ``at_output`` was measured; logits: metrics, top-1 agreement with
    float64 (share of valid positions), KL divergence (mean and worst position, nats)."""

    group: str
    mode: str
    output: str
    at_output: Metrics
    logits: Metrics
    top1_agreement: float
    kl_mean: float
    kl_max: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "mode": self.mode,
            "output": self.output,
            "at_output": vars(self.at_output),
            "logits": vars(self.logits),
            "top1_agreement": self.top1_agreement,
            "kl_mean": self.kl_mean,
            "kl_max": self.kl_max,
        }


@dataclass(frozen=True)
class Sweep:
    """The sweep of one scheme: ``baseline`` (every group quantized), the results per group and
    mode, the calibration and sweep times in seconds."""

    scheme: str
    baseline: GroupResult
    results: tuple[GroupResult, ...]
    calibration_seconds: float
    sweep_seconds: float

    def ranked(self, mode: str) -> list[GroupResult]:
        """``only``: the groups whose quantization alone costs the most KL first; ``all but``: the
        groups whose return to float saves the most KL (lowest remaining KL) first."""
        chosen = [result for result in self.results if result.mode == mode]
        return sorted(chosen, key=lambda result: result.kl_mean, reverse=mode == "only")


class PortSwitch:
    """Another port's per-group switches (:meth:`~gemma4_static.ports.Gemma4Port.quantize_groups`)
    with the calls a sweep makes of a :class:`~gemma4_static.quant.QuantProfile`."""

    calibration_seconds = 0.0  # its recipe's own: dynamic schemes calibrate nothing

    def __init__(self, port: Any) -> None:
        self.port = port
        self.groups = list(port.quantization_groups())

    def every(self) -> None:
        self.port.quantize_groups(set(self.groups))

    def only(self, group: str) -> None:
        self.port.quantize_groups({group})

    def all_but(self, group: str) -> None:
        self.port.quantize_groups(set(self.groups) - {group})


@torch.no_grad()
def run_sensitivity(model: Any, options: VerifyOptions, *, groups: Sequence[str] | None = None) -> Sweep:
    """The sweep of ``options.quant`` on ``model``'s sample prompt (one decode step:
    :func:`..session.session.open_session`) over ``groups`` (names of the profile's groups, or of the
    port's switches; default: every one)."""
    if options.quant is None:
        raise ValueError("a sensitivity sweep needs an integer scheme: options.quant is None")
    session = open_session(model, dataclasses.replace(options, steps=1))
    profile = session.sides.adopted if session.is_runtime else PortSwitch(session.port)
    known = profile.groups
    swept = known if groups is None else list(groups)
    unknown = [group for group in swept if group not in known]
    if unknown:
        raise ValueError(f"groups has unknown names {unknown}; expected some of {known}")
    outputs = _reference_outputs(session)
    started = time.perf_counter()
    profile.every()
    baseline = _measure(session, "every group", "all", outputs)
    results = []
    for mode in MODES:
        for group in swept:
            profile.only(group) if mode == "only" else profile.all_but(group)
            results.append(_measure(session, group, mode, outputs))
    profile.every()
    return Sweep(options.quant, baseline, tuple(results), profile.calibration_seconds, time.perf_counter() - started)


Extract = Callable[[PortPrefill], torch.Tensor]


def _reference_outputs(session: Session) -> dict[str, tuple[str, Extract, torch.Tensor]]:
    """Per output kind the port exposes: its description, how to read ours from a prefill, the float64
    reference (valid positions only)."""
    prompt, reference, exposed = session.prompt, session.reference, session.ours
    valid = prompt.attention_mask.bool()
    length = valid.shape[1]
    states = reference.hidden_states
    rows, positions, _ = session.compared_positions()
    compared = reference.logits_at(rows, positions)
    outputs = {"logits": ("logits", lambda ours: ours.all_logits[rows, positions], compared)}
    if exposed.all_logits is None:
        last = reference.logits_at(torch.arange(valid.shape[0]), prompt.last_index)
        outputs["logits"] = ("logits at each row's last valid token", lambda ours: ours.logits, last)
    if exposed.hidden_states is not None:
        outputs.update(_state_outputs(session, valid, states))
    if session.has_per_layer_inputs and exposed.per_layer_inputs is not None:
        ids = llm_input_ids(prompt, session.config)
        ple = hf_per_layer_inputs(session.reference_model, reference.hidden_states[0], ids)[valid]
        outputs["PLE"] = ("per-layer inputs", lambda ours: ours.per_layer_inputs[:, :length][valid], ple)
    if prompt.pixel_values is not None and exposed.soft_tokens is not None:
        soft = torch.cat(
            session.reference_model.model.get_image_features(
                prompt.pixel_values.double(), prompt.image_position_ids
            ).pooler_output
        )
        outputs["vision"] = ("soft tokens", lambda ours: torch.cat(ours.soft_tokens), soft)
    return outputs


def _state_outputs(session: Session, valid: torch.Tensor, states: tuple) -> dict:
    """The embeddings, each layer's hidden states and the last layer's (after the final norm); a port's
    states are ``(B, S, H)`` over the prompt's positions, as ``valid (B, S)``."""
    outputs = {
        "embeddings": ("embeddings after fusion", lambda ours: ours.hidden_states[0][valid], states[0][valid]),
        "last layer": (
            "last hidden states (final norm)",
            lambda ours: text_module(session.model).norm(ours.hidden_states[-1])[valid],
            states[-1][valid],
        ),
    }
    for index, state in enumerate(states[1:-1]):
        outputs[f"layer {index}"] = (
            f"layer {index} hidden states",
            lambda ours, index=index: ours.hidden_states[index + 1][valid],
            state[valid],
        )
    return outputs


def _measure(session: Session, group: str, mode: str, outputs: dict) -> GroupResult:
    ours = session.port.prefill(session.port_prompt, keep_intermediates=True)
    output = OUTPUTS.get(group, group if group in outputs else "last layer")
    output, extract, reference = outputs[output if output in outputs else "logits"]
    logits, reference_logits = outputs["logits"][1](ours), outputs["logits"][2]
    kl = kl_divergence(logits, reference_logits)
    agreement = float((logits.argmax(-1) == reference_logits.argmax(-1)).double().mean())
    return GroupResult(
        group,
        mode,
        output,
        measure(extract(ours), reference),
        measure(logits, reference_logits),
        agreement,
        float(kl.mean()),
        float(kl.max()),
    )
