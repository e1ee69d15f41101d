"""The side-by-side verification flow: the check groups of :data:`..groups.GROUPS` on one model and
one port (this project's runtime by default), in data-flow order, merged into report rows (stage,
check, metric, value, tolerance, PASS/FAIL/XFAIL/SKIP/INFO) and one verdict.

Every option of the run is in one :class:`~..options.VerifyOptions`; the session is opened once
(:func:`~..session.session.open_session`) and read by every group. A group whose needed capability
the port lacks is one SKIP row saying so (nothing is built for it); a check a port cannot answer is a
SKIP row with the reason, never a pass; a failure the port documents is an XFAIL with its reason."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch

from ...ports.capabilities import capabilities
from ..groups import BY_NAME, EVERY_SHARD, GROUPS, CheckGroup, kind_of
from ..options import VerifyOptions
from ..results.report import Row, explained, skip_row
from ..results.verdict import Verdict
from ..session.port_calls import guarded
from ..session.session import Session, open_session

# What a green verdict needs compared at least: the stages the groups declare (stage: its group), a
# prefill's logits and decode steps over the port's cache, wherever their group ran
MINIMUM = {stage: group.name for group in GROUPS for stage in group.minimum}
# named in the coverage whenever compared: what a port builds on its host side (its capabilities'
# stages), and its image stages
NAMED = {
    "host side": tuple(capability.coverage for capability in capabilities() if capability.coverage),
    "images": ("vision inputs", "vision prefill", "fusion", "masks vision"),
}


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
    figures: dict[str, list[dict[str, Any]]]  # what a report draws beside the rows (results.figures)


def profile_kind(options: VerifyOptions) -> str:
    """The kind of ``options``' profile (:data:`..groups.PROFILE_KINDS`)."""
    return kind_of(str(options.dtype).removeprefix("torch."), options.quant)


def selected(options: VerifyOptions) -> list[str]:
    """The groups ``options`` runs, in data-flow order: those it names (every one by default) that
    have rows in its profile's kind."""
    kind = profile_kind(options)
    return [group.name for group in GROUPS if options.runs(group.name) and group.runs_in(kind)]


@torch.no_grad()
def verify(
    model: Any, options: VerifyOptions | None = None, *, on_row: Callable[[Row], None] = lambda row: None
) -> Verification:
    """Run the check groups ``options`` selects (:func:`selected`; default options: every group on
    this project's runtime in float32) on ``model`` (an HF Gemma 4 model); ``on_row`` sees each row
    as it finishes. HF's answers come from ``options.reference`` where given
    (:mod:`..references.reference_folder`); ``options.shard``: one part of the run (:mod:`..shards`).
    Every port the run builds is closed when it is done."""
    options = options or VerifyOptions()
    names = selected(options)
    if options.shard is not None:
        names = options.shard.groups(names, EVERY_SHARD)
    recording = contextlib.nullcontext() if options.reference is None else options.reference.recording.active()
    with recording:
        session = open_session(model, options)
        rows = []
        try:
            for name in names:
                for row in run_group(session, name):
                    on_row(row)
                    rows.append(row)
                if options.until_failure and any(row.failed for row in rows):
                    break
        finally:
            session.close()
    port_name, version = session.port.name, str(session.port.version or "")
    verdict = verdict_over(rows, session.config.get_text_config().num_hidden_layers)
    return Verification(rows, verdict, port_name, version, options.profile, options.backend, session.figures)


def verdict_over(rows: list[Row], num_layers: int) -> Verdict:
    """The verdict over ``rows`` of a model of ``num_layers`` decoder layers (every layer compared
    where a decoder-layers row compared something), needing :data:`MINIMUM` and naming the stages of
    :data:`NAMED` in its coverage."""
    layers = any(row.stage == "decoder layers" and row.compared for row in rows)
    compared = num_layers if layers else 0
    return Verdict.of(rows, num_layers=num_layers, layers_compared=compared, minimum=MINIMUM, named=NAMED)


def run_verification(model: Any, options: VerifyOptions | None = None) -> list[Row]:
    """The rows of :func:`verify`."""
    return verify(model, options).rows


def run_group(session: Session, name: str) -> list[Row]:
    """The rows of check group ``name`` on an open session (none in a profile it has no rows in; one
    SKIP row when the port lacks a capability the group needs), each tagged with the group, a failure
    the port documents (its ``explain``) marked XFAIL with its reason."""
    group = BY_NAME[name]
    if not group.runs_in(profile_kind(session.options)):
        return []
    unmet = [capability for capability in group.needs if not session.under_test.has(capability)]
    if unmet:
        rows = [unmet_row(group, unmet[0], session.port.name)]
    else:
        with session.routing_active():
            rows = guarded(name, "the rest of this group", lambda: group.rows(session))
    rows = [replace(explained(row, session.port.explain), group=name) for row in rows]
    session.rows.extend(rows)
    return rows


def unmet_row(group: CheckGroup, capability: Any, port: str) -> Row:
    """The one SKIP row of ``group`` on a ``port`` that lacks ``capability``, worded by the capability."""
    check, reason = capability.absent
    return skip_row(group.name, check, reason.format(port=port, capability=capability.name))
