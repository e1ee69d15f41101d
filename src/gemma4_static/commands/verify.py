"""``gemma4-static verify``: the checks (or the fault self-test) on an embedded model or a checkpoint,
printed row by row with the verdict, optionally as strict JSON with the integer profile's sensitivity
sweep. Exit codes: :class:`~gemma4_static.oracle.checks.verdict.ExitCode`."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import TextIO

import torch

from ..executorch.backends import backend_named
from ..oracle.checks.report import Row, format_row
from ..oracle.checks.report_json import report_document, run_metadata, write_report
from ..oracle.checks.verdict import ExitCode
from ..oracle.flow import verify  # looked up per call: a test's substitute must not outlive it
from ..oracle.flow.sample_plan import SEEDS
from ..oracle.numerics.kernel_sets import active_kernels
from ..oracle.references import checkpoints, models  # looked up per call: tests substitute their builders


def colour_on(stream: TextIO) -> bool:
    """Whether to paint FAIL rows: on a terminal, unless ``NO_COLOR`` is set (no-color.org)."""
    return stream.isatty() and "NO_COLOR" not in os.environ


def _usage(message: object) -> int:
    print(f"gemma4-static verify: {message}", file=sys.stderr)
    return ExitCode.USAGE


def run_verify(args: argparse.Namespace) -> int:
    """The verification's exit code: 0 passed, 1 a check failed, 5 the minimum was not compared
    (:class:`ExitCode`); a ``ValueError`` (usage), the port's error and the suite's own propagate to
    the command line's one mapping of them (``cli``)."""
    started = time.perf_counter()
    if args.checkpoint is not None:
        try:
            model = checkpoints.load_checkpoint(args.checkpoint)
        except ValueError as error:
            return _usage(error)
        name = str(args.checkpoint)
    else:
        model = models.build_default_model(args.config)
        name = args.config
    unknown = sorted(set(args.without) - set(verify.CHECKS))
    if unknown:
        return _usage(f"--without names unknown checks {unknown}; expected some of {list(verify.CHECKS)}")
    checks = tuple(check for check in verify.CHECKS if check not in args.without)
    if args.sensitivity and (args.quant is None or not backend_named(args.backend).eager):
        return _usage("--sensitivity needs --quant SCHEME on backend torch")
    if args.self_test:
        from .self_test import self_test_command

        dtype = getattr(torch, args.dtype)
        return self_test_command(model, name, args.fault, checks, dtype, args.backend, started, quant=args.quant)
    return _report(args, model, name, checks, started)


def _report(args: argparse.Namespace, model: object, name: str, checks: tuple[str, ...], started: float) -> int:
    """Run the verification, print every row and the verdict, write the JSON; the verdict's exit code."""
    kernels = active_kernels()
    profile = args.dtype if args.quant is None else f"{args.quant} over float32"
    print(f"gemma4-static verify: {name} ({type(model).__name__}, {profile}; port {args.port}; {kernels})", flush=True)
    colour = colour_on(sys.stdout)
    first_failure = [True]

    def show(row: Row) -> None:
        marked = row.failed and first_failure[0]
        first_failure[0] = first_failure[0] and not row.failed
        print(format_row(row, colour=colour) + ("   <- first divergence" if marked else ""), flush=True)

    result = verify.verify(
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
        schedules_budget=args.schedules_budget,
        on_row=show,
    )
    verdict = result.verdict
    overflowing = [row for row in result.rows if row.failed and row.stage == "overflow"]
    if overflowing:
        print(f"verify: first overflow in {args.dtype}: {overflowing[0].check}")
    print(f"verify: {verdict.summary()} ({time.perf_counter() - started:.1f} s)")
    extra = None
    if args.sensitivity:
        from .sensitivity import sensitivity_section

        extra = sensitivity_section(model, name, args.quant, args.json, max_seq=args.max_seq, port=args.port)
    if args.json is not None:
        run = run_metadata(
            port=(result.port_name, result.port_version),
            model=name,
            profile=result.profile,
            backend=result.backend,
            kernel_set=kernels,
            seeds=SEEDS,
        )
        try:
            write_report(args.json, report_document(verdict, run, extra))
        except OSError as error:
            return _usage(f"cannot write the report to {str(args.json)!r}: {error}")
    return verdict.exit_code
