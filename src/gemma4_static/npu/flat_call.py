"""A stage called with a flat list of tensors, as a compiled program takes its inputs (an ExecuTorch
program, a Circle graph): which of a stage's arguments become inputs, how the others are rebuilt
inside, the wrapper that rebuilds them, the structure of the outputs a program returns flat, and the
signature a compiled stage is specific to."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.utils import _pytree as pytree


def rebuilt_leaf(leaf: Any) -> tuple | None:
    """How a program rebuilds an argument it does not take as an input: ``None`` stays ``None``, an
    empty tensor (a model's missing per-layer inputs, ``(B, S, 0)``) is made inside the program
    (ExecuTorch's runtime aborts on an empty input whose leading dim is above 1); ``None`` for a
    tensor the program takes."""
    if leaf is None:
        return ("none",)
    if isinstance(leaf, torch.Tensor) and leaf.numel() == 0:
        return ("empty", tuple(leaf.shape), leaf.dtype)
    return None


def flat_tensors(args: tuple) -> tuple[list[torch.Tensor], Any, tuple[tuple | None, ...]]:
    """The tensors a program takes among ``args`` (nested tuples flattened), the structure, and how
    each leaf it does not take is rebuilt (:func:`rebuilt_leaf`)."""
    leaves, spec = pytree.tree_flatten(args)
    fixed = tuple(rebuilt_leaf(leaf) for leaf in leaves)
    return [leaf for leaf, rebuilt in zip(leaves, fixed, strict=True) if rebuilt is None], spec, fixed


class FlatInputs(nn.Module):
    """``module`` called with its arguments rebuilt from a flat list of tensors."""

    def __init__(self, module: nn.Module, spec: Any, fixed: tuple[tuple | None, ...]) -> None:
        super().__init__()
        self.module, self.spec, self.fixed = module, spec, fixed

    def forward(self, *tensors: torch.Tensor) -> Any:
        given = iter(tensors)
        leaves = [
            next(given)
            if rebuilt is None
            else None
            if rebuilt[0] == "none"
            else torch.zeros(rebuilt[1], dtype=rebuilt[2])
            for rebuilt in self.fixed
        ]
        return self.module(*pytree.tree_unflatten(leaves, self.spec))


def output_structure(module: nn.Module, args: tuple) -> Any:
    """The structure of ``module``'s outputs at ``args`` (a program returns them flat)."""
    with torch.no_grad():
        return pytree.tree_structure(module(*args))


def call_signature(args: tuple) -> tuple:
    """What a compiled stage is specific to: the structure of ``args``, the leaves it rebuilds and each
    tensor's shape and dtype."""
    tensors, spec, fixed = flat_tensors(args)
    return str(spec), fixed, tuple((tuple(t.shape), t.dtype) for t in tensors)


class CompiledStage:
    """A stage run as compiled programs (one per static signature it is called with) behind the call
    signature of the PyTorch ``module`` it replaces, whose own attributes (e.g. ``reuses_kv``) it reads
    through."""

    def __init__(self, name: str, module: nn.Module) -> None:
        self.name, self.module = name, module

    def __getattr__(self, attribute: str) -> Any:
        if attribute in ("module", "_loaded"):  # not set yet (e.g. while copying): no recursion
            raise AttributeError(attribute)
        return getattr(self.module, attribute)
