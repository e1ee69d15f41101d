"""Expert routing against HF: a decided choice must agree, a tie is pinned and reported.

A mixture-of-experts router picks each token's top ``k`` of ``E`` experts, a discontinuous choice:
where HF's ``k``-th and ``k+1``-th router scores are closer than what fp32 rounding of the router's
input can move, this runtime and HF may each pick a different expert, and everything downstream of
that token then differs by much more than rounding. On the 26B-A4B geometry that happens about once
in 60,000 decisions (layer 19 of a 1027-token prompt: HF's probability gap 5.2e-8). So routing is
judged like greedy tokens (:mod:`..numerics.metrics`): a **decided** disagreement (HF's margin, the
log-probability gap between its ``k``-th and ``k+1``-th expert, above :data:`MARGIN_BOUND`) fails;
at a **tie** HF is pinned to this runtime's choice, computed by HF's own formula from HF's own
probabilities, so the stages downstream stay comparable; ties are counted and the closest named.
A tie by construction (two experts with one router row: bitwise equal scores on both sides) is no
coin toss: ``torch.topk``'s order decides it, this runtime must follow it, so it counts as decided;
two probabilities equal only by rounding (seen once in 200,000 choices under the ``baseline`` kernel
set) are a tie like any other.

Tokens are matched across the two sides by (layer, the ids of the token and every token before it
in its row), which holds across batching, padding layouts, chunks and decode steps (HF's per-row
runs and ``generate`` included). Runs of this runtime must come before HF's run of the same inputs,
as the verify flow orders them. Images: the key holds the placeholder ids, not the pixels.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from ...npu.experts import Router
from ...runtime import StaticGemma4Runtime
from ...spec import text_module
from ...stack import LayerStack
from ..results.report import Row

# Twice the worst log-probability shift between this runtime's and HF's router scores at the experts
# that decide the top k, over the MoE fixtures' prefill rows (26B-A4B geometry: 5.2e-5).
MARGIN_BOUND = 1e-4


def prefix_keys(ids: list[int], before: list[int] | None = None) -> list[int]:
    """For each of a row's valid ``ids``, a key of the ids up to and including it; after ``before``
    (the keys of the row so far) the new keys continue from its last one."""
    keys, key = [], before[-1] if before else 0
    for token in ids:
        key = hash((key, int(token)))
        keys.append(key)
    return keys


@dataclass
class RoutingLedger:
    """This runtime's expert choices by (layer, token key), and how HF's compared."""

    ours: dict[tuple[int, int], tuple[int, ...]] = field(default_factory=dict)
    matched: int = 0
    decided: list[str] = field(default_factory=list)
    ties: list[tuple[float, str]] = field(default_factory=list)

    @contextlib.contextmanager
    def active(self, model: Any) -> Iterator[RoutingLedger]:
        """Record this runtime's choices and pin HF (``model``) at ties while the block runs."""
        with contextlib.ExitStack() as stack:
            stack.enter_context(_OursRecorder(self).installed())
            stack.enter_context(_HFPinner(self, model).installed())
            yield self

    def rows(self) -> list[Row]:
        """A decided-disagreement row (must be 0) and a tie row (counted, the closest named)."""
        check = f"top-k of {self.matched} token choices vs HF"
        detail = "; ".join(self.decided[:3])
        ties = sorted(self.ties)
        closest = ", ".join(f"{where} ({margin:.2g})" for margin, where in ties[:3])
        return [
            Row("routing", f"{check}, HF margin > {MARGIN_BOUND:g}", "decided disagreements", len(self.decided), 0,
                detail=detail),
            Row("routing", f"{check}, ties pinned to this runtime's choice", "ties", len(ties), float("inf"),
                detail=f"closest: {closest}" if closest else ""),
        ]  # fmt: skip


class _OursRecorder:
    """Class-level wrappers on this runtime: which row histories run, at which positions, and what
    each router chose."""

    def __init__(self, ledger: RoutingLedger) -> None:
        self.ledger = ledger
        self.histories: dict[int, list[list[int]]] = {}  # per runtime, per row: the keys of its tokens
        self.current: StaticGemma4Runtime | None = None
        self.keys: list[list[int | None]] | None = None  # per row, per position of the current call

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        recorder = self
        prefill, decode, run, route = (
            StaticGemma4Runtime.prefill_outputs,
            StaticGemma4Runtime.decode_one,
            LayerStack.run,
            Router.forward,
        )

        def prefill_outputs(runtime, inputs, *args, **kwargs):
            rows = zip(inputs.raw_ids, inputs.valid_length, strict=True)
            recorder.histories[id(runtime)] = [prefix_keys(row[: int(n)].tolist()) for row, n in rows]
            recorder.current = runtime
            return prefill(runtime, inputs, *args, **kwargs)

        def decode_one(runtime, next_ids):
            for keys, token in zip(recorder.histories.get(id(runtime), []), next_ids[:, 0].tolist(), strict=False):
                keys += prefix_keys([token], keys)
            recorder.current = runtime
            return decode(runtime, next_ids)

        def stack_run(stack, hidden, per_layer_inputs, positions, *args, **kwargs):
            recorder.keys = [
                [row_keys[p] if p < len(row_keys) else None for p in row_positions]
                for row_keys, row_positions in zip(
                    recorder.histories.get(id(recorder.current), []), positions.tolist(), strict=False
                )
            ]
            try:
                return run(stack, hidden, per_layer_inputs, positions, *args, **kwargs)
            finally:
                recorder.keys = None  # a router outside a run (a stage traced for export) records nothing

        def router_forward(router, hidden):
            weights, index = route(router, hidden)
            layer = _layer_of(recorder.current, router)
            if layer is not None and recorder.keys is not None:
                for row_keys, row_index in zip(recorder.keys, index.tolist(), strict=False):
                    for key, chosen in zip(row_keys, row_index, strict=False):
                        if key is not None:
                            recorder.ledger.ours[(layer, key)] = tuple(sorted(chosen))
            return weights, index

        patches = (
            ("prefill_outputs", prefill_outputs, StaticGemma4Runtime),
            ("decode_one", decode_one, StaticGemma4Runtime),
            ("run", stack_run, LayerStack),
            ("forward", router_forward, Router),
        )
        originals = [(owner, name, getattr(owner, name)) for name, _, owner in patches]
        try:
            for name, wrapper, owner in patches:
                setattr(owner, name, wrapper)
            yield
        finally:
            for owner, name, original in originals:
                setattr(owner, name, original)


def _layer_of(runtime: StaticGemma4Runtime | None, router: Router) -> int | None:
    if runtime is None:
        return None
    for index, layer in enumerate(runtime.modules.layers):
        if layer.experts is not None and layer.experts.router is router:
            return index
    return None


class _HFPinner:
    """Hooks on HF's model: each call's token keys (following a cache across calls), and each
    router's choice compared with this runtime's (pinned at a tie)."""

    def __init__(self, ledger: RoutingLedger, model: Any) -> None:
        self.ledger, self.model = ledger, model
        self.histories: dict[int, list[list[int]]] = {}  # per cache, per row: the keys of its tokens
        self.keys: list[int | None] = []  # flat, in the router's token order
        self.pending: list[list[int]] = []  # the rows' keys after the current call

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        handles = [
            self.model.register_forward_pre_hook(self._before, with_kwargs=True),
            self.model.register_forward_hook(self._after, with_kwargs=True),
        ]
        for index, layer in enumerate(text_module(self.model).layers):
            if layer.enable_moe_block:
                handles.append(layer.router.register_forward_hook(self._pin(index, layer.router)))
        try:
            yield
        finally:
            for handle in handles:
                handle.remove()

    def _before(self, module: Any, args: tuple, kwargs: dict) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        cache = kwargs.get("cache", kwargs.get("past_key_values"))
        mask = kwargs.get("attention_mask")
        if ids is None:
            self.keys = []
            return
        past = self.histories.get(id(cache), [[] for _ in range(ids.shape[0])]) if cache is not None else None
        rows, self.keys, self.pending = [], [], []
        for row in range(ids.shape[0]):
            new = ids[row].tolist()
            valid = [True] * len(new) if mask is None else mask[row, -len(new) :].bool().tolist()
            before = past[row] if past is not None else []
            added = prefix_keys([t for t, ok in zip(new, valid, strict=True) if ok], before)
            keys = iter(added)
            self.keys += [next(keys) if ok else None for ok in valid]
            rows.append(before + added)
        self.pending = rows

    def _after(self, module: Any, args: tuple, kwargs: dict, output: Any) -> None:
        cache = getattr(output, "cache", None)
        if cache is not None and self.pending:
            self.histories[id(cache)] = self.pending

    def _pin(self, layer: int, router: Any) -> Any:
        def hook(module: Any, args: tuple, output: tuple) -> tuple:
            probabilities, weights, index = output
            if len(self.keys) != index.shape[0]:
                return output
            k = index.shape[-1]
            top = probabilities.topk(k + 1, dim=-1)
            margins = (top.values[:, k - 1].log() - top.values[:, k].log()).tolist()
            weights, index = weights.clone(), index.clone()
            for token, key in enumerate(self.keys):
                ours = None if key is None else self.ledger.ours.get((layer, key))
                if ours is None:
                    continue
                self.ledger.matched += 1
                if tuple(sorted(index[token].tolist())) == ours:
                    continue
                where, margin = f"layer {layer} token {token}", margins[token]
                if margin > MARGIN_BOUND or is_structural_tie(router, *top.indices[token, k - 1 :].tolist()):
                    hf = sorted(index[token].tolist())
                    self.ledger.decided.append(f"{where}: HF {hf}, ours {list(ours)} (HF margin {margin:.2g})")
                    continue
                self.ledger.ties.append((margin, where))
                chosen = torch.tensor(ours)
                picked = probabilities[token, chosen]
                index[token] = chosen
                weights[token] = picked / picked.sum() * router.per_expert_scale[chosen]
            return probabilities, weights, index

        return hook


def is_structural_tie(router: Any, last: int, next_: int) -> bool:
    """Whether HF's ``k``-th and ``k+1``-th experts tie by construction (one router row for both, so
    both sides compute the same score bitwise and ``torch.topk``'s order decides): a decided choice.
    Two scores equal by rounding are a tie like any other."""
    weight = router.proj.weight
    return bool(torch.equal(weight[last], weight[next_]))
