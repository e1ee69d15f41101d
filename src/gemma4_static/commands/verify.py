"""``gemma4-static verify``: the checks (or the fault self-test) on an embedded model or a checkpoint,
printed row by row with the verdict, optionally as strict JSON with the integer profile's sensitivity
sweep. Exit codes: :class:`~gemma4_static.oracle.results.verdict.ExitCode`."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import TextIO

import torch

from ..backends import backend_named
from ..oracle.flow import verify  # looked up per call: a test's substitute must not outlive it
from ..oracle.groups import GROUPS
from ..oracle.groups.export import GROUP as EXPORT
from ..oracle.groups.overflow import GROUP as OVERFLOW
from ..oracle.numerics.kernel_sets import active_kernels
from ..oracle.options import GRID_BUDGET, VerifyOptions, group_names
from ..oracle.references import checkpoints, models  # looked up per call: tests substitute their builders
from ..oracle.references.recording import ACTIVE, Recording
from ..oracle.references.reference_folder import judged_live
from ..oracle.results.report import Row, format_row
from ..oracle.results.report_json import report_document, run_metadata, write_report
from ..oracle.results.verdict import ExitCode
from ..oracle.session.memory import Budget
from ..oracle.session.sample_plan import SEEDS
from ..oracle.session.session import checked_for_config
from ..ports.registry import declared_limits, port_factory


def colour_on(stream: TextIO) -> bool:
    """Whether to paint FAIL rows: on a terminal, unless ``NO_COLOR`` is set (no-color.org)."""
    return stream.isatty() and "NO_COLOR" not in os.environ


def _usage(message: object) -> int:
    print(f"gemma4-static verify: {message}", file=sys.stderr)
    return ExitCode.USAGE


def real_size_left_out(args: argparse.Namespace) -> dict[str, str]:
    """The groups a checkpoint's run leaves out by default, with why (none with ``--all-groups``)."""
    if args.checkpoint is None or args.all_groups:
        return {}
    return {group.name: group.real_size for group in GROUPS if group.real_size}


def options_of(args: argparse.Namespace) -> VerifyOptions:
    """The run's options from the command line (a ``ValueError`` names a bad one: usage, exit 2)."""
    from ..oracle.references.reference_folder import open_reference
    from ..oracle.shards import Shard

    left_out = {*args.without, *([EXPORT.name] if args.no_export else []), *real_size_left_out(args)}
    return VerifyOptions(
        port=args.port,
        dtype=getattr(torch, args.dtype),
        quant=args.quant,
        backend=args.backend,
        mask_value=args.mask_value,
        max_seq=args.max_seq,
        steps=args.steps,
        groups=tuple(name for name in group_names() if name not in left_out),
        schedules_budget=args.schedules_budget or GRID_BUDGET,
        reference=None if args.reference is None else open_reference(args.reference),
        shard=None if args.shard is None else Shard.parse(args.shard),
    )


def model_of(args: argparse.Namespace, options: VerifyOptions) -> tuple[object, str, Budget | None]:
    """The model to verify, its name and, for a checkpoint, its memory budget: the checkpoint (its run
    estimated first, refused by a ``ValueError`` where it cannot fit; loaded in its stored dtype,
    memory-mapped: the session converts what the profile computes in another dtype),
    the embedded ``--config``, or the port's own default model
    (:func:`~gemma4_static.oracle.references.models.default_models`). A profile the model's config
    cannot be judged in is refused before it is built or loaded."""
    if args.checkpoint is not None:
        files = checkpoints.open_checkpoint(args.checkpoint)
        checked_for_config(files.config, options)
        budget = Budget.of(files, options, args.memory)
        print(f"gemma4-static verify: {budget.describe()}", flush=True)
        for name, why in real_size_left_out(args).items():
            print(f"gemma4-static verify: {name} left out at a real size ({why}); --all-groups runs it", flush=True)
        budget.check()
        return checkpoints.load_checkpoint(args.checkpoint), str(args.checkpoint), budget
    name = args.config or models.default_models(declared_limits(port_factory(args.port)))[0]
    checked_for_config(models.default_config(name), options)
    return models.build_default_model(name), name, None


def run_verify(args: argparse.Namespace) -> int:
    """The verification's exit code: 0 passed, 1 a check failed, 5 the minimum was not compared
    (:class:`ExitCode`); a ``ValueError`` (usage), the port's error and the suite's own propagate to
    the command line's one mapping of them (``cli``)."""
    started = time.perf_counter()
    if args.self_test and (args.json is not None or args.html is not None):
        return _usage(
            "--json and --html write a verification's report; --self-test prints which check catches each fault"
        )
    if args.sensitivity and (args.quant is None or not backend_named(args.backend).eager):
        return _usage("--sensitivity needs --quant SCHEME on backend torch")
    if args.self_test and (args.reference is not None or args.shard is not None):
        return _usage("--self-test injects faults into live runs; --reference and --shard judge a verification")
    try:
        options = options_of(args)
        model, name, budget = model_of(args, options)
    except ValueError as error:
        return _usage(error)
    if args.self_test:
        from .self_test import self_test_command

        return self_test_command(model, name, args.fault, options, started)
    return _report(args, model, name, options, started, budget)


def _outer(model: object, options: VerifyOptions) -> Recording | None:
    """The recording already active where this command runs in a process that keeps HF's answers
    (a test session, a program calling the command line), unless this run's answers depend on more
    than its questions (:func:`~..oracle.references.reference_folder.judged_live`)."""
    return ACTIVE.get() if judged_live(model, options.quant) is None else None


def _report(
    args: argparse.Namespace, model: object, name: str, options: VerifyOptions, started: float, budget: Budget | None
) -> int:
    """Run the verification, print every row and the verdict, write the JSON and the page (also what
    finished when it is interrupted); the verdict's exit code."""
    kernels = active_kernels()
    print(
        f"gemma4-static verify: {name} ({type(model).__name__}, {options.profile}; port {args.port}; {kernels})",
        flush=True,
    )
    colour = colour_on(sys.stdout)
    first_failure = [True]

    def show(row: Row) -> None:
        marked = row.failed and first_failure[0]
        first_failure[0] = first_failure[0] and not row.failed
        print(format_row(row, colour=colour) + ("   <- first divergence" if marked else ""), flush=True)

    seen: list[Row] = []
    if options.reference is not None:
        print(f"gemma4-static verify: HF's answers from {options.reference.describe()}", flush=True)
    live = options.reference is None
    hf = Recording("live", outer=_outer(model, options)) if live else options.reference.recording
    try:
        with hf.active():
            result = verify.verify(model, options, on_row=lambda row: (show(row), seen.append(row)))
    except KeyboardInterrupt:
        verdict = verify.verdict_over(seen, model.config.get_text_config().num_hidden_layers)
        run = _run_metadata(args.port, "", options, name, kernels)
        incomplete = f"interrupted after {len(seen)} rows; the check groups after them did not run"
        _write(args, report_document(verdict, run, {"incomplete": incomplete} | merge_sections(options, model)))
        raise
    verdict = result.verdict
    overflowing = [row for row in result.rows if row.failed and row.group == OVERFLOW.name]
    if overflowing:
        print(f"verify: first overflow in {args.dtype}: {overflowing[0].check}")
    how = "read back from the reference" if options.reference is not None else "computed live"
    print(f"verify: {hf.asked} answers of HF {how} in {hf.seconds:.1f} s")
    print(f"verify: {verdict.summary()} ({time.perf_counter() - started:.1f} s)")
    extra = {"figures": result.figures} | merge_sections(options, model)
    if budget is not None:
        print(f"verify: peak resident memory {budget.peak_text()}")
    if args.sensitivity:
        from .sensitivity import sensitivity_section

        extra |= sensitivity_section(model, name, options, args.json)
    run = _run_metadata(result.port_name, result.port_version, options, name, kernels)
    if budget is not None:
        run["memory"] = budget.measured()
    try:
        _write(args, report_document(verdict, run, extra))
    except OSError as error:
        return _usage(f"cannot write the report: {error}")
    return verdict.exit_code


def merge_sections(options: VerifyOptions, model: object) -> dict:
    """The report's sections naming the reference judged against and the shard run (what merge reads)."""
    section = {}
    if options.reference is not None:
        reference = options.reference
        answers = reference.manifest["answers"]["sha256"]
        section["reference"] = {"folder": str(reference.folder), "describe": reference.describe(), "answers": answers}
    if options.shard is not None:
        layers = model.config.get_text_config().num_hidden_layers
        section["shard"] = options.shard.as_dict() | {"num_layers": layers}
    return section


def _run_metadata(port: str, version: str, options: VerifyOptions, name: str, kernels: str) -> dict:
    return run_metadata(
        port=(port, version),
        model=name,
        profile=options.profile,
        backend=options.backend,
        kernel_set=kernels,
        seeds=SEEDS,
        options=options.as_dict(),
    )


def _write(args: argparse.Namespace, document: dict) -> None:
    """The report as JSON (``--json``) and as a web page (``--html``), where asked."""
    if args.json is not None:
        write_report(args.json, document)
    if args.html is not None:
        from ..oracle.pages.verify_page import verify_page

        args.html.write_text(verify_page(document))
        print(f"verify: report page written to {args.html}")
