"""``gemma4-static merge SHARD.json ...``: the reports of ``verify --shard I/N`` joined into the whole
run's (:mod:`..oracle.flow.merge`): its verdict printed with the whole run's coverage and exit code,
optionally written as JSON and as a web page."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add_parser(commands: Any, writable_file: Any) -> None:
    merge = commands.add_parser("merge", help="join the reports of verify --shard I/N into the whole run's verdict")
    merge.add_argument("shards", type=Path, nargs="+", metavar="SHARD.json", help="every shard's verify --json report")
    merge.add_argument("--json", type=writable_file, metavar="FILE", help="write the whole run's report as JSON")
    merge.add_argument("--html", type=writable_file, metavar="FILE", help="write the whole run's report page")


def run_merge(args: argparse.Namespace) -> int:
    """The whole run's exit code (0 passed, 1 failed, 3 the port raised, 5 the minimum not compared);
    shards that do not make one run are a ``ValueError`` (usage, exit 2)."""
    from ..oracle.flow.merge import load_shards, merge_reports
    from ..oracle.results.report_json import write_report
    from ..oracle.results.verdict import verdict_words

    document = merge_reports(load_shards(args.shards))
    counts = ", ".join(f"{count} {status}" for status, count in document["counts"].items())
    print(f"merge: {len(args.shards)} shards of {document['model']} ({document['metadata']['port']['name']})")
    verdict = verdict_words(document["exit_code"], document["missing"])
    print(f"merge: {counts}; coverage: {document['coverage']}; {verdict}")
    if args.json is not None:
        write_report(args.json, document)
    if args.html is not None:
        from ..oracle.pages.verify_page import verify_page

        args.html.write_text(verify_page(document))
        print(f"merge: report page written to {args.html}")
    return document["exit_code"]
