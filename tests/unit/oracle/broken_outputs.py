"""This runtime with one of its outputs broken, for the tests that every output a port returns is
judged (``verify``'s groups and the fuzzer): ``Negated_<output>`` (tensors negated, generated tokens
each the next id: wrong under any metric a profile gates), ``NonFinite_<output>`` (one value of it NaN,
at a padded position where the output has padding: caught only by a judge that looks everywhere)
and ``AllButLast`` (the logits at every position off by 32 but each row's last, right: a bug another
engine shipped)."""

from __future__ import annotations

import dataclasses

import torch

from gemma4_static.ports.static import StaticRuntimePort

FIELDS = ("logits", "hidden_states", "per_layer_inputs", "soft_tokens", "all_logits", "chunk_logits")
UNJUDGED = ("extra",)  # free-form: what a port keeps for itself
OUTPUTS = (*FIELDS, "decode", "generate")


def negated(value):
    """``value`` negated (a tensor, or each tensor of a tuple)."""
    return tuple(negated(item) for item in value) if isinstance(value, tuple) else -value


def one_nan(value):
    """``value`` with its last element NaN (of a tuple, in its last tensor): a padded position where
    the tensor has padding (right-padded rows), the last position of the last row otherwise."""
    if isinstance(value, tuple):
        return (*value[:-1], one_nan(value[-1]))
    broken = value.detach().clone()
    broken.view(-1)[-1] = float("nan")
    return broken


class BrokenOutput(StaticRuntimePort):
    """This runtime with its output ``broken`` (a PortPrefill field, ``decode`` or ``generate``) put
    through ``damage``."""

    broken = ""
    damage = staticmethod(negated)

    def prefill(self, prompt, *, keep_intermediates=False):
        result = super().prefill(prompt, keep_intermediates=keep_intermediates)
        value = getattr(result, self.broken, None) if self.broken in FIELDS else None
        return result if value is None else dataclasses.replace(result, **{self.broken: self.damage(value)})

    def decode(self, next_ids):
        logits = super().decode(next_ids)
        return self.damage(logits) if self.broken == "decode" else logits

    def generate(self, prompt, *, max_new_tokens, eos_token_id=None):
        tokens = super().generate(prompt, max_new_tokens=max_new_tokens, eos_token_id=eos_token_id)
        return (tokens + 1) % self.config.get_text_config().vocab_size if self.broken == "generate" else tokens


class AllButLast(StaticRuntimePort):
    """The logits at every position 32 off, but each row's last valid one (right padding): the prefill's
    last-token logits and everything else right."""

    def prefill(self, prompt, *, keep_intermediates=False):
        result = super().prefill(prompt, keep_intermediates=keep_intermediates)
        if result.all_logits is None:
            return result
        last = torch.zeros_like(prompt.input_ids)  # each row's valid positions first
        last[torch.arange(len(last)), prompt.attention_mask.sum(dim=1) - 1] = 1
        offset = 32.0 * (1 - prompt.laid_out(last))[..., None]
        return dataclasses.replace(result, all_logits=result.all_logits + offset)


for _output in OUTPUTS:
    globals()[f"Negated_{_output}"] = type(f"Negated_{_output}", (BrokenOutput,), {"broken": _output})
for _output in (*FIELDS, "decode"):
    globals()[f"NonFinite_{_output}"] = type(
        f"NonFinite_{_output}", (BrokenOutput,), {"broken": _output, "damage": staticmethod(one_nan)}
    )
