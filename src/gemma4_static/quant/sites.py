"""Quantization sites: one weight tensor of a module this project owns (a stage, or a
:class:`QuantLinear` standing in for a shared ``nn.Linear``) with the activation quantizer of the
matmul that reads it, switchable between float, observing (calibration) and quantized."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import nn

from .fake_quant import ActivationQuantizer, quantized_weight

STATES = ("float", "observe", "quantized")
_OBSERVED = contextvars.ContextVar[torch.Tensor | None]("observed positions", default=None)


@contextlib.contextmanager
def observed_positions(valid: torch.Tensor) -> Iterator[None]:
    """While the block runs, a site observing an activation ``(B, S, ...)`` whose ``(B, S)`` is
    ``valid``'s shape observes only the positions ``valid`` marks (a static buffer's padding is never
    calibration data; any other shape, e.g. a chunk's or the LM head's last tokens, is observed whole)."""
    token = _OBSERVED.set(valid.bool())
    try:
        yield
    finally:
        _OBSERVED.reset(token)


def _observed_part(x: torch.Tensor) -> torch.Tensor:
    valid = _OBSERVED.get()
    if valid is None or x.dim() < 3 or tuple(x.shape[:2]) != tuple(valid.shape):
        return x
    return x[valid]


class QuantLinear(nn.Module):
    """``F.linear`` over the weight and bias of ``linear`` (shared, not copied): a module of its own,
    so a site can swap its weight and hook its input without touching the model it came from."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight, self.bias = linear.weight, linear.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias)


class Site:
    """The weight ``owner.<attribute>`` (``(rows, columns)``, a row per output) and, with
    ``activation_bits``, the input ``argument`` of the forward of ``reads`` (by default ``owner``) as
    the matmul's activation.
    ``groups`` name what the site belongs to (its stage or layer, its projection kind).

    States: ``float`` (the original weight, activations untouched), ``observe`` (float, the
    activation's range recorded), ``quantized`` (the fake-quantized weight and activation; the state
    it starts in, so a call before calibration fails with a clear error instead of running in float)."""

    def __init__(
        self,
        name: str,
        groups: tuple[str, ...],
        owner: nn.Module,
        attribute: str,
        *,
        weight_bits: int,
        group_size: int | None = None,
        activation_bits: int | None = None,
        argument: int = 0,
        reads: nn.Module | None = None,
    ) -> None:
        self.name, self.groups, self.owner, self.attribute = name, groups, owner, attribute
        self.original = getattr(owner, attribute)
        fake = quantized_weight(self.original, weight_bits, group_size)
        parameter = isinstance(self.original, nn.Parameter)
        self.quantized = nn.Parameter(fake, requires_grad=False) if parameter else fake
        self.activation = None if activation_bits is None else ActivationQuantizer(activation_bits)
        self.argument = argument
        if self.activation is not None:
            (owner if reads is None else reads).register_forward_pre_hook(self._on_input)
        self.set("quantized")

    def set(self, state: str) -> None:
        if state not in STATES:
            raise ValueError(f"state must be one of {STATES}, got {state!r}")
        self.state = state
        setattr(self.owner, self.attribute, self.quantized if state == "quantized" else self.original)

    def _on_input(self, module: nn.Module, args: tuple) -> tuple | None:
        if self.state == "observe":
            self.activation.observe(_observed_part(args[self.argument]))
        if self.state != "quantized":
            return None
        changed = list(args)
        changed[self.argument] = self.activation(args[self.argument])
        return tuple(changed)


def linear_site(
    name: str, groups: tuple[str, ...], parent: nn.Module, attribute: str, bits: int, group_size: int | None, act: int
) -> Site:
    """A site for the ``nn.Linear`` at ``parent.<attribute>``, first replaced there by a :class:`QuantLinear`."""
    stand_in = QuantLinear(getattr(parent, attribute))
    setattr(parent, attribute, stand_in)
    return Site(name, groups, stand_in, "weight", weight_bits=bits, group_size=group_size, activation_bits=act)
