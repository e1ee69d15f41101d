"""Stage outputs read out of a port's own modules with forward hooks, for the ports that compute a
whole forward in one call: what enters the first decoder layer and what each layer returns."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch


@contextlib.contextmanager
def captured_layers(layers: list[Any]) -> Iterator[list[torch.Tensor]]:
    """While the block runs, the list fills with the first layer's input hidden states (its
    ``hidden_states`` argument, or its first positional one) and each layer's output (the first
    element when a layer returns a tuple), in call order: HF's ``output_hidden_states`` order
    without the final norm."""
    states: list[torch.Tensor] = []

    def before(module: Any, args: tuple, kwargs: dict) -> None:
        if not states:
            states.append(kwargs["hidden_states"] if "hidden_states" in kwargs else args[0])

    def after(module: Any, args: tuple, output: Any) -> None:
        states.append(output[0] if isinstance(output, tuple) else output)

    handles = [layers[0].register_forward_pre_hook(before, with_kwargs=True)]
    handles += [layer.register_forward_hook(after) for layer in layers]
    try:
        yield states
    finally:
        for handle in handles:
            handle.remove()


@contextlib.contextmanager
def captured_output(owner: Any, method: str) -> Iterator[list[Any]]:
    """While the block runs, ``owner.method`` is wrapped so that the list collects what each call
    returns (for a stage a port computes in a method, not a module)."""
    outputs: list[Any] = []
    original = getattr(owner, method)

    def recording(*args: Any, **kwargs: Any) -> Any:
        outputs.append(original(*args, **kwargs))
        return outputs[-1]

    setattr(owner, method, recording)
    try:
        yield outputs
    finally:
        delattr(owner, method)  # the instance attribute goes; the class's method shows again
