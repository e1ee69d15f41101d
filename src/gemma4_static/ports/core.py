"""The core of the port interface: what every verdict needs from a Gemma 4 implementation under
test, and the values it passes around.

A *port* is an implementation of Gemma 4 inference (this project's static runtime, ExecuTorch's
Gemma 4, Qualcomm's static QNN Gemma 4, a team's own) seen through :class:`PortCore` and the
optional capabilities of :mod:`.capabilities` (together :class:`~.port.Gemma4Port`). Conventions
(the same as HF's, so no check converts):

- ids ``(B, S)`` int64, right-padded unless ``limits.batch.padding_side`` says otherwise; a 0/1
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
and reads its :class:`~.limits.PortLimits` from the *built* port (so a factory function works as
well as a class). Each :meth:`PortCore.prefill` starts a new conversation (whatever the port's
cache held before is forgotten; a check shows it), :meth:`PortCore.decode` continues the latest
one, and :meth:`PortCore.close` is called once the suite is done with a port (release a device there).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from ..cpu.greedy import greedy
from ..cpu.schedule import expand_schedule
from .limits import PortLimits
from .prompt import Prompt


class NotExposed(Exception):
    """A stage the port does not expose; the message says why (shown beside the skipped check)."""


def not_exposed(port: Any, what: str) -> NotExposed:
    """The :class:`NotExposed` of a capability ``what`` the port does not have (its default)."""
    return NotExposed(f"{port.name} does not expose {what}")


@dataclass(frozen=True)
class PortSetup:
    """The static sizes a check asks a port for: batch, static length, the image slots ``((start,
    tokens), ...)`` (image ``i`` of a row fills ``[start, start + tokens)`` of slot ``i``) and the
    prefill schedule: the chunk lengths every prefill runs in, in order, the last repeating until the
    prompt is covered (``(W + 1,)``: chunks of ``W + 1``; ``None``: the port's own policy,
    :meth:`~.capabilities.schedules.Schedules.prefill_schedule`). A schedule the suite asks for is
    one the port's :meth:`~.limits.ChunkLimits.refusal` accepts. ``quant``: the integer scheme the
    port runs, one of its ``limits.schemes.names`` (``None``: its float profile); the port quantizes
    itself in its own recipe.

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
    token in a chunk holds any values there, finite as every value returned: the suite checks that
    each is, padded positions included)."""

    logits: torch.Tensor
    hidden_states: tuple[torch.Tensor, ...] | None = None
    per_layer_inputs: torch.Tensor | None = None
    soft_tokens: tuple[torch.Tensor, ...] | None = None
    all_logits: torch.Tensor | None = None
    chunk_logits: tuple[torch.Tensor, ...] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class PortCore:
    """What every port has: a name and version (shown in reports), its :class:`~.limits.PortLimits`
    (what it accepts), its pad id, a prefill, a decode step, greedy generation and ``close``. Only
    :meth:`prefill` and :meth:`decode` must be filled in; a verdict that compared neither is never
    green."""

    name = "unnamed port"
    version = ""
    limits = PortLimits()
    pad_token_id: int | None = None  # what generate writes after a row's EOS

    def close(self) -> None:
        """Called once the suite is done with this port (release a device or a process here); by
        default nothing."""

    def prefill(self, prompt: Prompt, *, keep_intermediates: bool = False) -> PortPrefill:
        """Prefill ``prompt`` (:class:`~.prompt.Prompt`: ``input_ids``, ``attention_mask``, optional
        ``pixel_values`` and ``image_position_ids``, padded on the side ``limits.batch.padding_side``
        names), starting a new conversation; with ``keep_intermediates`` also what
        :class:`PortPrefill` may hold."""
        raise not_exposed(self, "prefill")

    def decode(self, next_ids: torch.Tensor) -> torch.Tensor:
        """One token per row ``(B, 1)`` after the prefill, each row at its next position: ``(B, vocab)``."""
        raise not_exposed(self, "a decode step")

    def generate(self, prompt: Prompt, *, max_new_tokens: int, eos_token_id: int | None = None) -> torch.Tensor:
        """Greedy generation: the new tokens ``(B, max_new_tokens)``, the pad id after a row's EOS.
        By default the greedy loop of HF's ``generate`` over this port's own :meth:`prefill` and
        :meth:`decode` (a port with its own loop overrides it)."""
        if self.pad_token_id is None:
            raise not_exposed(self, "greedy generation (no pad id)")
        eos = torch.tensor([] if eos_token_id is None else [eos_token_id], dtype=torch.long)
        logits = self.prefill(prompt).logits
        return greedy(logits, self.decode, max_new_tokens=max_new_tokens, eos=eos, pad_token_id=self.pad_token_id)

    def _one_text_row(self, prompt: Prompt) -> torch.Tensor:
        """``prompt.input_ids (1, S)`` of a port that takes one unpadded row of text; ``NotExposed``
        for anything else (a helper for adapters)."""
        if prompt.input_ids.shape[0] != 1 or not bool(prompt.attention_mask.bool().all()):
            raise NotExposed(f"{self.name} takes one unpadded row")
        if prompt.pixel_values is not None:
            raise NotExposed(f"{self.name} is text only")
        return prompt.input_ids
