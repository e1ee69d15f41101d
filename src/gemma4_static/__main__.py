"""Command line: ``gemma4-static verify`` (also ``python -m gemma4_static verify``)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # verification never reaches the network


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gemma4-static", description="Static-shape Gemma 4 runtime tools.")
    commands = parser.add_subparsers(dest="command", required=True)
    verify = commands.add_parser("verify", help="check every runtime stage against HF transformers")
    verify.add_argument(
        "--config",
        choices=("tiny", "e2b-geometry"),
        default="tiny",
        help="embedded default model to verify (default: tiny); ignored with --checkpoint",
    )
    verify.add_argument("--checkpoint", type=Path, metavar="PATH", help="a local Gemma 4 checkpoint folder")
    verify.add_argument("--json", type=Path, metavar="FILE", help="also write the report as JSON to FILE")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from .models import build_default_model, load_checkpoint
    from .verify import format_row, run_verification, write_json

    started = time.perf_counter()
    if args.checkpoint is not None:
        try:
            model = load_checkpoint(args.checkpoint)
        except ValueError as error:
            print(f"gemma4-static verify: {error}", file=sys.stderr)
            return 2
        name = str(args.checkpoint)
    else:
        model = build_default_model(args.config)
        name = args.config
    print(f"gemma4-static verify: {name} ({type(model).__name__})", flush=True)
    rows = run_verification(model, on_row=lambda row: print(format_row(row), flush=True))
    failed = [row for row in rows if not row.passed]
    elapsed = time.perf_counter() - started
    print(f"{len(rows) - len(failed)} passed, {len(failed)} failed in {elapsed:.1f} s")
    if args.json is not None:
        write_json(rows, args.json, model=name)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
