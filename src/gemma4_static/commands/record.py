"""``gemma4-static record``: HF's answers to everything a deterministic verify asks (sample prompts and
images, every check group's setups, the schedules grid, decode steps, generation), for each port's
limits and a profile, written to a reference folder that ``verify --reference`` judges from without
running HF (:mod:`..oracle.references.reference_folder`).

A port other than this runtime is recorded on a stand-in (this runtime under the port's declared
limits, :mod:`..ports.stand_in`: the questions follow from the limits; no lowering, no device), or
on the port itself with ``--live`` (its own checks' questions too)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any


def add_parser(commands: Any, bounded: Any, configs: tuple[str, ...]) -> None:
    record = commands.add_parser("record", help="record HF's answers once, for verify --reference to judge from")
    record.add_argument("--out", type=Path, required=True, metavar="DIR", help="the reference folder to write")
    record.add_argument("--force", action="store_true", help="replace a reference already in --out")
    record.add_argument("--config", choices=configs, default="tiny", help="embedded model (default: tiny)")
    record.add_argument("--checkpoint", type=Path, metavar="PATH", help="a local Gemma 4 checkpoint folder")
    record.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default="float32", help="the profile")
    record.add_argument(
        "--port",
        action="append",
        metavar="NAME",
        help="record for this port's limits (repeatable; default: every built-in port installed)",
    )
    record.add_argument(
        "--live", action="store_true", help="run the ports themselves, not this runtime in their limits"
    )
    record.add_argument("--max-seq", type=bounded(1, 8192), metavar="N", help="as verify's --max-seq")
    record.add_argument("--steps", type=bounded(1, 4096), metavar="N", help="as verify's --steps")
    record.add_argument("--schedules-budget", type=bounded(1, 10**7), metavar="N", help="as verify's (default 3000)")
    record.add_argument("--quiet", action="store_true", help="no progress on stderr")


def run_record(args: argparse.Namespace) -> int:
    """Record the reference; 0 when written, 2 on a usage error (a port that cannot be recorded)."""
    import torch

    from ..oracle.flow import verify
    from ..oracle.options import GRID_BUDGET, VerifyOptions
    from ..oracle.references import checkpoints, models
    from ..oracle.references.reference_folder import checked_output, new_reference, save_reference
    from ..oracle.session.sample_plan import SEEDS
    from ..ports.registry import BUILT_IN, DEFAULT_PORT, port_factory
    from ..ports.stand_in import STAND_IN

    started = time.perf_counter()
    checked_output(args.out, force=args.force)  # before any work: a ValueError is a usage error
    if args.checkpoint is not None:
        model, name = checkpoints.load_checkpoint(args.checkpoint), str(args.checkpoint)
    else:
        model, name = models.build_default_model(args.config), args.config
    reference = new_reference(args.out, model, name)
    seen: list[tuple[Any, str]] = []
    answered = 0.0  # seconds HF spent answering so far
    for port in args.port or BUILT_IN:
        try:
            limits = getattr(port_factory(port), "limits", None)
        except ValueError as error:
            if args.port:
                raise
            print(f"record: {port} left out: {error}", file=sys.stderr)
            continue
        stand_in = port != DEFAULT_PORT and not args.live
        same = next((other for known, other in seen if stand_in and known == limits), None)
        if same is not None:
            print(f"record: {port}: the limits of {same}, already recorded")
            continue
        seen.append((limits, port))
        reference.label = (port, stand_in)
        begun = time.perf_counter()
        try:
            options = VerifyOptions(
                port=f"{STAND_IN}{port}" if stand_in else port,
                dtype=getattr(torch, args.dtype),
                max_seq=args.max_seq,
                steps=args.steps,
                schedules_budget=args.schedules_budget or GRID_BUDGET,
                reference=reference,
            )
            result = verify.verify(model, options)
        except ValueError as error:  # a port this model or profile cannot be judged on
            if args.port:
                raise
            print(f"record: {port} left out: {error}", file=sys.stderr)
            continue
        seconds = time.perf_counter() - begun
        for plan in reference.manifest["plans"]:
            plan.setdefault("seconds", round(seconds, 1))
        failed = sum(row.failed for row in result.rows)
        where = "this runtime in its limits" if stand_in else "the port itself"
        hf = reference.recording.seconds - answered
        answered = reference.recording.seconds
        print(
            f"record: {port} ({where}): {len(result.rows)} rows, {failed} failed, {seconds:.1f} s "
            f"({hf:.1f} s of it HF answering)",
            flush=True,
        )
    save_reference(reference, SEEDS)
    size = sum(path.stat().st_size for path in args.out.iterdir()) / 2**20
    calls = len(reference.recording.calls)
    print(f"record: {args.out}: {calls} answers, {size:.1f} MiB, in {time.perf_counter() - started:.1f} s")
    return 0
