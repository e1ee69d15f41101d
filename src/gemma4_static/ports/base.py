"""The port interface: what a Gemma 4 implementation under test exposes to the parity checks.

A *port* is an implementation of Gemma 4 inference (this project's static runtime, ExecuTorch's
Gemma 4, Qualcomm's static QNN Gemma 4, a team's own) seen through :class:`Gemma4Port`. Every stage
is optional: a port overrides the methods it has, the others raise :class:`NotExposed` with the
reason, and a check on a stage a port lacks is reported as skipped with that reason, never as
passed. Conventions (the same as HF's, so no check converts):

- ids ``(B, S)`` int64, right-padded unless ``limits.padding_side`` says otherwise; a 0/1
  ``attention_mask (B, S)``; positions start at 0 at each row's first token;
- masks ``{layer_type: (B, 1, Q, K)}`` boolean, ``True`` = the query may attend the key;
- RoPE ``{layer_type: (cos, sin)}``, each ``(B, S, head_dim)`` in HF's rotate-half layout (the two
  halves repeat the frequencies; pairs that do not rotate have cos 1, sin 0);
- hidden states ``(B, S, H)``; logits ``(B, vocab)`` after the final softcap unless a method says
  otherwise.

A port is built by a factory ``factory(model, setup) -> Gemma4Port`` from an HF Gemma 4 model (the
weights to load, with the port's own converter) and a :class:`PortSetup` (the static sizes the
checks need); :mod:`.registry` finds factories by name or ``module:factory``.

Lifecycle. The suite builds a port several times, once per setup it needs (see :class:`PortSetup`),
and reads its :class:`PortLimits` from the *built* port (so a factory function works as well as a
class). Each :meth:`Gemma4Port.prefill` starts a new conversation (whatever the port's cache held
before is forgotten; a check shows it), :meth:`Gemma4Port.decode` continues the latest one, and
:meth:`Gemma4Port.close` is called once the suite is done with a port (release a device there).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from ..cpu.greedy import greedy
from ..cpu.schedule import expand_schedule
from .calibration import Calibration
from .host_stages import HostStages
from .limits import PortLimits
from .prompt import Prompt

__all__ = [
    "Gemma4Port",
    "NotExposed",
    "OwnCheck",
    "PortLimits",
    "PortPrefill",
    "PortSetup",
]


class NotExposed(Exception):
    """A stage the port does not expose; the message says why (shown beside the skipped check)."""


@dataclass(frozen=True)
class PortSetup:
    """The static sizes a check asks a port for: batch, static length, the image slots ``((start,
    tokens), ...)`` (image ``i`` of a row fills ``[start, start + tokens)`` of slot ``i``) and the
    prefill schedule: the chunk lengths every prefill runs in, in order, the last repeating until the
    prompt is covered (``(W + 1,)``: chunks of ``W + 1``; ``None``: the port's own policy,
    :meth:`Gemma4Port.prefill_schedule`). A schedule the suite asks for is one the port's
    :meth:`PortLimits.refusal` accepts. ``quant``: the integer scheme the port runs, one of its
    ``limits.schemes`` (``None``: its float profile); the port quantizes itself in its own recipe.

    The setups the suite asks for, each capped at ``limits.max_seq`` and built within ``limits``:
    the sample setup (the sample prompt, ``W + 3`` tokens in one row or two ragged rows, with two
    images per row where the port takes images, plus the decode steps: every check of the prefill,
    the decode steps and generation), first built as one unpadded text row when the factory declares
    no limits (then again if the built port's limits ask for another prompt); the RoPE setup
    (``max_seq`` = 4100, batch 1); the chunked-prefill setup (chunks of ``W + 1`` over a prompt of
    ``2W + 3`` tokens); the schedules grid and the fuzzer (one ``max_seq`` for a run, a schedule per
    prefill, within the chunk limits)."""

    max_seq: int
    batch_size: int = 1
    image_slots: tuple[tuple[int, int], ...] = ()
    prefill_schedule: tuple[int, ...] | None = None
    quant: str | None = None

    def chunks(self, length: int) -> list[int] | None:
        """The chunk lengths a prefill of ``length`` tokens runs in under ``prefill_schedule``
        (:mod:`~gemma4_static.cpu.schedule`: its last length repeats), or ``None`` (the port's own policy)."""
        return None if self.prefill_schedule is None else expand_schedule(self.prefill_schedule, length)


@dataclass(frozen=True)
class PortPrefill:
    """A prefill's results: ``logits (B, vocab)`` at each row's last valid token and, where the port
    exposes them, the embeddings after fusion and each layer's output (``hidden_states``, ``(B, S,
    H)`` each, HF's ``output_hidden_states`` order without the final norm), the per-layer inputs
    ``(B, S, L, P)``, the soft tokens (one ``(T_i, H)`` per image, in the prompt's order), the logits
    at every position ``all_logits (B, S, vocab)`` and, for a chunked prefill, per chunk ``(B,
    vocab)`` each row's logits at its last token inside that chunk (``chunk_logits``; a row without a
    token in a chunk holds anything there)."""

    logits: torch.Tensor
    hidden_states: tuple[torch.Tensor, ...] | None = None
    per_layer_inputs: torch.Tensor | None = None
    soft_tokens: tuple[torch.Tensor, ...] | None = None
    all_logits: torch.Tensor | None = None
    chunk_logits: tuple[torch.Tensor, ...] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class OwnCheck:
    """One step of a port's own verification flow (its own idea of parity) and what it said:
    ``said`` is its verdict in its own words (e.g. the lines it printed), ``raised`` its error where
    the step raised; ``stages`` the suite's stages that judge the same thing (shown beside it)."""

    step: str
    said: str
    stages: tuple[str, ...] = ()
    raised: str = ""


class Gemma4Port(HostStages, Calibration):
    """Base class of a port: every stage raises :class:`NotExposed`; a port overrides what it has
    (the host-side stages: :class:`~.host_stages.HostStages`; calibration in a static scheme:
    :class:`~.calibration.Calibration`).

    ``name`` and ``version`` identify it in reports; ``limits`` say what it accepts."""

    name = "unnamed port"
    version = ""
    limits = PortLimits()
    pad_token_id: int | None = None  # what generate writes after a row's EOS

    def close(self) -> None:
        """Called once the suite is done with this port (release a device or a process here); by
        default nothing."""

    def prefill_schedule(self, length: int) -> list[int]:
        """The chunk lengths this port's own runner prefills ``length`` tokens in (its policy); by
        default one call."""
        return [length]

    def explain(self, row: Any) -> str | None:
        """The port's own documented reason for a failing report row (a known divergence, shown as
        an expected failure), or ``None``: a failure nobody documented is a failure."""
        return None

    def quantization_groups(self) -> tuple[str, ...]:
        """In an integer scheme, the groups it can quantize or leave in float one by one (tables,
        ``"layer i"``, ``"LM head"``, ...), in data-flow order: the switch a sensitivity sweep
        needs. ``NotExposed`` by default."""
        raise self._missing("per-group quantization switches")

    def quantize_groups(self, groups: set[str]) -> None:
        """From the next prefill on: ``groups`` (names of :meth:`quantization_groups`) quantized,
        every other group in float."""
        raise self._missing("per-group quantization switches")

    def own_checks(self, prompt: Prompt) -> list[OwnCheck]:
        """The port's own verification flow run on ``prompt`` (the sample prompt, as the port takes
        it), one :class:`OwnCheck` per step: shown beside the suite's verdict, never gating it."""
        raise self._missing("a verification flow of its own")

    def _missing(self, stage: str) -> NotExposed:
        return NotExposed(f"{self.name} does not expose {stage}")

    def _one_text_row(self, prompt: Prompt) -> torch.Tensor:
        """``prompt.input_ids (1, S)`` of a port that takes one unpadded row of text; ``NotExposed``
        for anything else."""
        if prompt.input_ids.shape[0] != 1 or not bool(prompt.attention_mask.bool().all()):
            raise NotExposed(f"{self.name} takes one unpadded row")
        if prompt.pixel_values is not None:
            raise NotExposed(f"{self.name} is text only")
        return prompt.input_ids

    def prefill_masks(
        self, attention_mask: torch.Tensor, mm_token_type_ids: torch.Tensor | None = None
    ) -> dict[str, torch.Tensor]:
        """``{layer_type: (B, 1, S, S) bool}`` for a 0/1 ``attention_mask (B, S)``."""
        raise self._missing("prefill masks")

    def rope(self, position_ids: torch.Tensor, dtype: torch.dtype) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """``{layer_type: (cos, sin)}``, each ``(B, S, head_dim)`` in ``dtype``, for ``position_ids (B, S)``."""
        raise self._missing("RoPE tables")

    def token_embedding(self, input_ids: torch.Tensor) -> torch.Tensor:
        """The scaled token embedding ``(B, S, H)`` of ``input_ids (B, S)``."""
        raise self._missing("the token embedding")

    def prefill(self, prompt: Prompt, *, keep_intermediates: bool = False) -> PortPrefill:
        """Prefill ``prompt`` (:class:`~.prompt.Prompt`: ``input_ids``, ``attention_mask``, optional
        ``pixel_values`` and ``image_position_ids``, padded on the side ``limits.padding_side`` names),
        starting a new conversation; with ``keep_intermediates`` also what :class:`PortPrefill` may hold."""
        raise self._missing("prefill")

    def decode(self, next_ids: torch.Tensor) -> torch.Tensor:
        """One token per row ``(B, 1)`` after the prefill, each row at its next position: ``(B, vocab)``."""
        raise self._missing("a decode step")

    def generate(self, prompt: Prompt, *, max_new_tokens: int, eos_token_id: int | None = None) -> torch.Tensor:
        """Greedy generation: the new tokens ``(B, max_new_tokens)``, the pad id after a row's EOS.
        By default the greedy loop of HF's ``generate`` over this port's own :meth:`prefill` and
        :meth:`decode` (a port with its own loop overrides it)."""
        if self.pad_token_id is None:
            raise self._missing("greedy generation (no pad id)")
        eos = torch.tensor([] if eos_token_id is None else [eos_token_id], dtype=torch.long)
        logits = self.prefill(prompt).logits
        return greedy(logits, self.decode, max_new_tokens=max_new_tokens, eos=eos, pad_token_id=self.pad_token_id)
