"""``gemma4-static fuzz``: the property-based differential fuzzer (:mod:`~gemma4_static.oracle.fuzz`) on
one port and one embedded model; a divergence shrunk and written out as a standalone reproduction.
Exit codes as ``verify``'s: 0 no divergence (or one the port documents: XFAIL), 1 a divergence, 2 usage,
3 the port raised in its factory, 4 an internal error of the suite."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from ..backends import BACKENDS

DATABASE = Path(".hypothesis") / "gemma4-fuzz"  # failing examples, kept between runs (shareable)


def add_parser(commands: Any, bounded: Any, configs: tuple[str, ...]) -> None:
    """The ``fuzz`` subcommand's arguments."""
    fuzz = commands.add_parser("fuzz", help="drive a port through random prefills, schedules and decodes against HF")
    fuzz.add_argument("--port", default="gemma4-static", metavar="NAME", help="a built-in port or module:factory")
    fuzz.add_argument("--config", choices=configs, default="tiny", help="embedded model (default: tiny)")
    fuzz.add_argument("--max-examples", type=bounded(1, 10**6), default=200, metavar="N", help="examples (default 200)")
    fuzz.add_argument("--seed", type=bounded(0, 2**31), default=0, metavar="S", help="hypothesis seed (default 0)")
    fuzz.add_argument(
        "--max-seq", type=bounded(2, 8192), metavar="N", help="static length (default: four windows and 8 tokens)"
    )
    fuzz.add_argument(
        "--database", type=Path, default=DATABASE, metavar="DIR", help=f"example database (default {DATABASE})"
    )
    fuzz.add_argument(
        "--reproduction",
        type=Path,
        default=Path("gemma4-fuzz-reproduction"),
        metavar="DIR",
        help="where a failure's standalone script and model go (default ./gemma4-fuzz-reproduction)",
    )
    fuzz.add_argument(
        "--backend",
        choices=tuple(BACKENDS),
        default="torch",
        help="this runtime's backend (port gemma4-static only)",
    )
    fuzz.add_argument(
        "--quant",
        metavar="SCHEME",
        help="an integer scheme the port runs (static ones calibrated on the suite's prompts): judged against "
        "HF in float64 under the scheme's gates",
    )
    fuzz.add_argument("--no-shrink", action="store_true", help="report the first failure as found")
    fuzz.add_argument(
        "--max-seconds",
        type=bounded(1, 10**6),
        metavar="S",
        help="time budget: no example starts after S seconds; the run ends with what it covered",
    )
    fuzz.add_argument(
        "--plain-ids",
        action="store_true",
        help="draw no special ids (placeholders, boi/eoi, BOS, EOS, pad) into prompts and decode inputs "
        "(to look past a divergence on them)",
    )
    fuzz.add_argument("--quiet", action="store_true", help="no progress on stderr")


def run_fuzz(args: argparse.Namespace) -> int:
    """Build the target, fuzz it, print the outcome; the exit code (a ``ValueError``, the port's error and
    the suite's own propagate to the command line's one mapping of them, ``cli``)."""
    from ..oracle.fuzz import FuzzTarget, fuzz
    from ..oracle.options import VerifyOptions
    from ..oracle.references.models import build_default_model, default_config
    from ..oracle.results.verdict import ExitCode
    from ..oracle.session.session import checked_for_config

    started = time.perf_counter()
    options = VerifyOptions(port=args.port, quant=args.quant, backend=args.backend, max_seq=args.max_seq)  # usage
    checked_for_config(default_config(args.config), options)  # a ValueError: usage, before the model is built
    model = build_default_model(args.config)
    target = FuzzTarget.of(model, options)
    profile = "" if args.quant is None else f", {args.quant} against float64"
    print(
        f"gemma4-static fuzz: port {args.port} on {args.config} ({args.backend}{profile}, max_seq {target.max_seq}, "
        f"batch {target.batch}), {args.max_examples} examples from seed {args.seed}",
        flush=True,
    )
    result = fuzz(
        target,
        max_examples=args.max_examples,
        seed=args.seed,
        database=args.database,
        reproduction=args.reproduction,
        shrink=not args.no_shrink,
        max_seconds=args.max_seconds,
        special_ids=not args.plain_ids,
    )
    elapsed = time.perf_counter() - started
    print(f"fuzz: covered {result.coverage}")
    if result.stopped:
        print(f"fuzz: stopped: {result.stopped}")
    if result.failure is None:
        print(f"fuzz: {result.examples} examples in {elapsed:.1f} s ({result.rate:.2f}/s): no divergence (exit 0)")
        return ExitCode.PASSED
    examples, seconds = result.first_failure
    print(f"fuzz: divergence at example {examples} after {seconds:.1f} s: {result.failure}")
    if result.reproduction is not None:
        print(f"fuzz: reproduction {result.reproduction} (run it alone: python {result.reproduction})")
    if result.expected is not None:  # as verify's XFAIL: documented, so not a failure
        print(f"fuzz: XFAIL, documented by the port: {result.expected}")
        print(f"fuzz: {result.examples} examples in {elapsed:.1f} s (exit 0)")
        return ExitCode.PASSED
    print(f"fuzz: {result.examples} examples in {elapsed:.1f} s (exit 1)")
    return ExitCode.FAILED
