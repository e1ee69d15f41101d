"""The side-by-side verification flow: every parity check of :mod:`..checks.parity` on one model and one
port (this project's runtime by default), merged into report rows (stage, check, metric, value,
tolerance, PASS/FAIL/SKIP).

A check whose stage the port does not expose is one SKIP row with the reason. The groups marked
runtime-only in :data:`CHECKS` read this project's runtime itself (its decode and chunk mask tables,
mask value, overflow hooks, exported stages): for another port they are one SKIP row each."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import torch

from ...executorch.backends import backend_named
from ...ports.registry import DEFAULT_PORT
from ..checks import parity
from ..checks.figures import layer_points, position_points
from ..checks.report import Row, explained, merge, skip_row
from ..checks.verdict import Verdict
from ..numerics import overflow
from ..references.reference_folder import Reference, admission
from . import verify_host, verify_inputs, verify_numerics, verify_own
from .port_calls import PLAIN, guarded, plain_prefill_logits
from .session import LAYER_GROUP, Session, open_session
from .shards import Shard
from .verify_long import long_position_rows
from .verify_masks import chunk_mask_rows, prefill_mask_rows, vision_mask_rows
from .verify_quantization import quantization_rows
from .verify_schedules import schedules_rows
from .verify_steps import chunked_prefill_rows, decode_rows


def layer_rows(session: Session) -> Iterator[Row]:
    """Every decoder layer's output (grouped), every producing layer's K/V and the prefill logits."""
    if session.low_precision:
        yield from verify_numerics.layer_rows(session)
        return
    yield from guarded("decoder layers", "hidden states", lambda: hidden_state_rows(session))
    yield from guarded("KV cache", "K/V of every producing layer", lambda: verify_host.kv_rows(session))
    valid = session.prompt.attention_mask.bool()
    hf_logits = session.theirs.logits[torch.arange(valid.shape[0]), session.prompt.last_index]
    yield from parity.logits_rows(session.ours.logits, hf_logits, session.dtype)
    yield from guarded("prefill logits", PLAIN, lambda: [plain_prefill_row(session, hf_logits)])
    yield from guarded("prefill logits", "every valid position", lambda: [all_logits_row(session)])


def plain_prefill_row(session: Session, hf_logits: torch.Tensor) -> Row:
    """The sample prompt's last-token logits from a plain prefill (no intermediates asked) vs HF's."""
    logits = plain_prefill_logits(session.port, session.port_prompt)
    return parity.stage_row("prefill logits", PLAIN, logits, hf_logits, session.dtype)


def all_logits_row(session: Session) -> Row:
    """The logits at every valid position (what scoring and perplexity read) vs HF's."""
    valid = session.prompt.attention_mask.bool()
    ours = session.exposed(session.ours.all_logits, "the logits at every position")
    if ours.shape[:2] != valid.shape:
        return parity.compare("prefill logits", "every valid position", ours, session.theirs.logits, 0.0)
    row = parity.stage_row(
        "prefill logits", "every valid position", ours[valid], session.theirs.logits[valid], session.dtype
    )
    errors = (ours[valid].double() - session.theirs.logits[valid].double()).abs().amax(dim=-1).tolist()
    session.figures["positions"] = position_points(valid.nonzero().tolist(), errors, row.tolerance)
    return row


def hidden_state_rows(session: Session) -> Iterator[Row]:
    valid = session.prompt.attention_mask.bool()
    states = session.exposed(session.ours.hidden_states, "hidden states")
    layers = parity.hidden_state_rows(states, session.theirs, valid, session.dtype)[1:]
    session.figures["layers"] = layer_points([[row] for row in layers])
    for start in range(0, len(layers), LAYER_GROUP):
        group = layers[start : start + LAYER_GROUP]
        yield merge(group, "decoder layers", f"layers {start}-{start + len(group) - 1} hidden states")


def overflow_rows(session: Session) -> Iterator[Row]:
    """The largest activation of every stage and layer over the prefill and decode, with headroom
    (PyTorch backend: the ExecuTorch programs' activations are not observable, see :mod:`..numerics.overflow`)."""
    if backend_named(session.backend).eager:
        yield from overflow.overflow_rows(session.ranges, session.dtype)


def routing_rows(session: Session) -> Iterator[Row]:
    """Expert choices of every run so far vs HF's: decided disagreements fail, ties are pinned and
    counted (:mod:`..checks.routing`). No rows without a MoE block; one SKIP row where the choices
    cannot be seen (another port, backend or profile)."""
    if session.routing is not None:
        yield from session.routing.rows()
    elif session.config.get_text_config().enable_moe_block:
        reason = (
            "recorded on this runtime's PyTorch stages in float32 only: elsewhere the router runs inside a "
            "program, so a routing tie (HF margin <= 1e-4) cannot be pinned and may move the stages after it"
        )
        yield skip_row("routing", "expert choices vs HF", reason)


# Every check group by name, in data-flow order (``verify --without NAME`` leaves one out), and
# whether it reads this project's runtime itself (then another port gets one SKIP row for it).
CHECKS: dict[str, tuple[Callable[[Session], Iterator[Row]], bool]] = {
    "quantization": (quantization_rows, False),
    "inputs": (verify_inputs.input_rows, False),
    "prefill-masks": (prefill_mask_rows, False),
    "decode-masks": (verify_host.decode_mask_rows, False),
    "chunk-masks": (chunk_mask_rows, True),
    "vision-masks": (vision_mask_rows, False),
    "rope": (verify_host.rope_rows, False),
    "mask-value": (verify_host.mask_value_rows, False),
    "layers": (layer_rows, False),
    "chunked-prefill": (chunked_prefill_rows, False),
    "decode": (decode_rows, False),
    "schedules": (schedules_rows, False),
    "long-positions": (long_position_rows, False),
    "routing": (routing_rows, False),
    "overflow": (overflow_rows, True),
    "export": (verify_host.export_rows, False),
    "own-checks": (verify_own.own_check_rows, False),
}

INTEGER_ONLY = ("quantization",)  # groups with rows only in an integer profile (--quant)


@dataclass(frozen=True)
class Verification:
    """A finished verification: its rows (in data-flow order, each tagged with its check group), the
    verdict over them, and what the report names about the run (port, model, profile, backend, kernels)."""

    rows: list[Row]
    verdict: Verdict
    port_name: str
    port_version: str
    profile: str
    backend: str
    figures: dict[str, list[dict[str, Any]]]  # what a report draws beside the rows (checks.figures)


@torch.no_grad()
def verify(
    model: Any,
    *,
    dtype: torch.dtype = torch.float32,
    max_seq: int | None = None,
    steps: int | None = None,
    export: bool = True,
    backend: str = "torch",
    mask_value: float | None = None,
    checks: tuple[str, ...] = tuple(CHECKS),
    port: str = DEFAULT_PORT,
    quant: str | None = None,
    schedules_budget: int | None = None,
    on_row: Callable[[Row], None] = lambda row: None,
    until_failure: bool = False,
    reference: Reference | None = None,
    shard: Shard | None = None,
) -> Verification:
    """Run the ``checks`` (names of :data:`CHECKS`; ``export`` only with ``export=True``) on ``model``
    (an HF Gemma 4 model) in the profile ``dtype`` against ``port`` (a built-in name or
    ``module:factory``; this project's runtime on ``backend`` with forbidden keys at ``mask_value``
    by default; with ``quant`` in that integer scheme, :func:`.session.open_session`; the schedules grid
    within ``schedules_budget`` port calls); ``on_row`` sees each row as it finishes; ``until_failure``:
    no group after the first with a failed row is run (the self-test). HF's answers come from a
    ``reference`` where given (:mod:`..references.reference_folder`); ``shard``: one part of the run
    (:mod:`.shards`). Every port the run builds is closed when it is done."""
    unknown = sorted(set(checks) - set(CHECKS))
    if unknown:
        raise ValueError(f"checks has unknown names {unknown}; expected some of {list(CHECKS)}")
    profile = profile_name(dtype, quant)
    admit = admission(model, reference, port, profile, quant)
    if shard is not None and model.config.get_text_config().enable_moe_block:
        raise ValueError(f"shard {shard}: a mixture-of-experts model's routing is judged over a whole run")
    with contextlib.nullcontext() if reference is None else reference.recording.active():
        session = open_session(
            model,
            dtype=dtype,
            max_seq=max_seq,
            steps=steps,
            backend=backend,
            mask_value=mask_value,
            port=port,
            quant=quant,
            admit=admit,
        )
        session.shard = shard
        if schedules_budget is not None:
            session.schedules_budget = schedules_budget
        names = [name for name in CHECKS if name in checks and (name != "export" or export)]
        rows = []
        try:
            for name in names if shard is None else shard.groups(names):
                for row in run_group(session, name):
                    on_row(row)
                    rows.append(row)
                if until_failure and any(row.failed for row in rows):
                    break
        finally:
            session.close()
    port_name, version = session.port.name, str(session.port.version or "")
    verdict = verdict_over(rows, session.config.get_text_config().num_hidden_layers)
    return Verification(rows, verdict, port_name, version, profile, backend, session.figures)


def verdict_over(rows: list[Row], num_layers: int) -> Verdict:
    """The verdict over ``rows`` of a model of ``num_layers`` decoder layers (every layer compared
    where a decoder-layers row compared something)."""
    layers = any(row.stage == "decoder layers" and row.compared for row in rows)
    return Verdict.of(rows, num_layers=num_layers, layers_compared=num_layers if layers else 0)


def profile_name(dtype: torch.dtype, quant: str | None) -> str:
    """The profile as a report names it: ``float32``, ``bfloat16``, ``8da4w+emb8 over float32``."""
    return str(dtype).removeprefix("torch.") if quant is None else f"{quant} over float32"


def run_verification(model: Any, **options: Any) -> list[Row]:
    """The rows of :func:`verify` (same options)."""
    return verify(model, **options).rows


def run_group(session: Session, name: str) -> list[Row]:
    """The rows of check group ``name`` (:data:`CHECKS`) on an open session (one SKIP row for a
    runtime-only group on another port), each tagged with the group, a failure the port documents
    (:meth:`~gemma4_static.ports.base.Gemma4Port.explain`) marked XFAIL with its reason."""
    stage, runtime_only = CHECKS[name]
    if runtime_only and not session.is_runtime:
        reason = f"reads this project's runtime itself; {session.port.name} is another port"
        rows = [skip_row(name, "runtime internals", reason)]
    else:
        with session.routing_active():
            rows = guarded(name, "the rest of this group", lambda: stage(session))
    rows = [replace(explained(row, session.port.explain), group=name) for row in rows]
    session.rows.extend(rows)
    return rows
