"""``gemma4-static verify``: the checks (or the fault self-test) on an embedded model or a checkpoint,
printed row by row, optionally as JSON with the integer profile's sensitivity sweep."""

from __future__ import annotations

import argparse
import sys
import time

import torch

from .oracle.checks.report import Row, format_row, write_json
from .oracle.flow.verify import CHECKS, run_verification
from .oracle.numerics.kernel_sets import active_kernels
from .oracle.references import checkpoints, models  # looked up per call: tests substitute their builders


def run_verify(args: argparse.Namespace) -> int:
    """Exit code 0 when every row passes, 1 when one fails, 2 on a usage error."""

    started = time.perf_counter()
    if args.checkpoint is not None:
        try:
            model = checkpoints.load_checkpoint(args.checkpoint)
        except ValueError as error:
            print(f"gemma4-static verify: {error}", file=sys.stderr)
            return 2
        name = str(args.checkpoint)
    else:
        model = models.build_default_model(args.config)
        name = args.config
    unknown = sorted(set(args.without) - set(CHECKS))
    if unknown:
        print(
            f"gemma4-static verify: --without names unknown checks {unknown}; expected some of {list(CHECKS)}",
            file=sys.stderr,
        )
        return 2
    checks = tuple(check for check in CHECKS if check not in args.without)
    if args.sensitivity and (args.quant is None or args.backend != "torch"):
        print("gemma4-static verify: --sensitivity needs --quant SCHEME on backend torch", file=sys.stderr)
        return 2
    try:
        if args.self_test:
            from .oracle.faults.self_test import self_test_command

            dtype = getattr(torch, args.dtype)
            return self_test_command(model, name, args.fault, checks, dtype, args.backend, started, quant=args.quant)
        kernels = active_kernels()
        profile = args.dtype if args.quant is None else f"{args.quant} over float32"
        header = f"{name} ({type(model).__name__}, {profile}; port {args.port}; {kernels})"
        print(f"gemma4-static verify: {header}", flush=True)
        first_failure = [True]

        def show(row: Row) -> None:
            marked = not row.passed and first_failure[0]
            first_failure[0] = first_failure[0] and row.passed
            print(format_row(row) + ("   <- first divergence" if marked else ""), flush=True)

        rows = run_verification(
            model,
            dtype=getattr(torch, args.dtype),
            max_seq=args.max_seq,
            steps=args.steps,
            export=not args.no_export,
            backend=args.backend,
            mask_value=args.mask_value,
            checks=checks,
            port=args.port,
            quant=args.quant,
            on_row=show,
        )
    except ValueError as error:
        print(f"gemma4-static verify: {error}", file=sys.stderr)
        return 2
    failed = [row for row in rows if not row.passed]
    overflowing = [row for row in failed if row.stage == "overflow"]
    if overflowing:
        print(f"verify: first overflow in {args.dtype}: {overflowing[0].check}")
    elapsed = time.perf_counter() - started
    print(f"verify: {len(rows) - len(failed)} rows PASS, {len(failed)} FAIL ({elapsed:.1f} s)")
    extra = None
    if args.sensitivity:
        from .oracle.flow.sensitivity_command import sensitivity_section

        extra = sensitivity_section(model, name, args.quant, args.json, max_seq=args.max_seq)
    if args.json is not None:
        try:
            write_json(rows, args.json, model=name, extra=extra)
        except OSError as error:
            print(f"gemma4-static verify: cannot write the report to {str(args.json)!r}: {error}", file=sys.stderr)
            return 2
    return 1 if failed else 0
