"""``gemma4-static compare A.json B.json``: two verify reports side by side (two ports on one model,
or one port before and after a change), printed and optionally as a web page; exit code 1 when B
regressed against A beyond the threshold (:mod:`..oracle.pages.compare`), so it can gate a pull
request."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add_parser(commands: Any, writable_file: Any) -> None:
    compare = commands.add_parser(
        "compare", help="two verify reports (--json) side by side: what got worse, better, newly failing or compared"
    )
    compare.add_argument("a", type=Path, metavar="A.json", help="the first report (the baseline: before a change)")
    compare.add_argument("b", type=Path, metavar="B.json", help="the second report (after the change, another port)")
    compare.add_argument(
        "--threshold",
        type=float,
        default=6.0,
        metavar="DB",
        help="a row or stage that lost more than DB decibels is a regression (default 6: an error doubled)",
    )
    compare.add_argument("--html", type=writable_file, metavar="FILE", help="also write the comparison as a web page")


def run_compare(args: argparse.Namespace) -> int:
    """0: no regression; 1: B regressed (a row newly failing, a row or a stage beyond the threshold);
    a report that cannot be read is a ``ValueError`` (usage, exit 2)."""
    from ..oracle.pages.compare import compare_reports, load_report, summary_lines

    names = (str(args.a), str(args.b))
    comparison = compare_reports(load_report(args.a), load_report(args.b), args.threshold)
    print("\n".join(summary_lines(comparison, names)))
    if args.html is not None:
        from ..oracle.pages.compare_page import compare_page

        args.html.write_text(compare_page(comparison, names))
        print(f"compare: page written to {args.html}")
    return int(comparison.regressed)
