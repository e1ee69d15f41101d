"""The verify reports of every built-in port on every embedded model it takes, written once and
compared later: a refactoring of the judge keeps the same rows with the same statuses.

    python benchmarks/behaviour_reports.py write DIR [--only PORT ...]   # one JSON report per run
    python benchmarks/behaviour_reports.py compare BEFORE AFTER          # rows and statuses that changed

A run that verify refuses (exit 2) is kept as its message; ``compare`` lists, per run, every row
whose status changed, every row only one side has, and refusals that changed, and exits 1 when
anything did."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

PORTS = ("gemma4-static", "executorch-gemma4", "qnn-gemma4", "tico-gemma4")
CONFIGS = ("tiny", "e2b-vision", "e2b-geometry", "e2b-multimodal", "31b-geometry", "26b-a4b-geometry")
# the profiles and options beyond float32, on the runs where they cost little
EXTRA_RUNS = (
    ("gemma4-static", "tiny", ("--dtype", "bfloat16")),
    ("gemma4-static", "tiny", ("--dtype", "float16")),
    ("gemma4-static", "tiny", ("--quant", "a8w8")),
    ("gemma4-static", "tiny", ("--backend", "executorch")),
    ("gemma4-static", "tiny", ("--mask-value", "-1")),
    ("gemma4-static", "e2b-geometry", ("--dtype", "bfloat16")),
    ("executorch-gemma4", "tiny", ("--quant", "8da4w")),
    ("qnn-gemma4", "tiny", ("--quant", "a16w16t")),
)


def runs(only: list[str] | None) -> list[tuple[str, str, tuple[str, ...]]]:
    """Every (port, config, extra options) of the matrix, restricted to the ports ``only`` names."""
    chosen = [(port, config, ()) for port in PORTS for config in CONFIGS] + list(EXTRA_RUNS)
    return [run for run in chosen if not only or run[0] in only]


def run_name(port: str, config: str, options: tuple[str, ...]) -> str:
    return "--".join([port, config, *(option.lstrip("-") for option in options)])


def write(folder: Path, only: list[str] | None) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    for port, config, options in runs(only):
        name = run_name(port, config, options)
        report = folder / f"{name}.json"
        if report.exists() or (folder / f"{name}.refused").exists():
            continue
        command = [sys.executable, "-m", "gemma4_static", "verify", "--quiet", "--port", port, "--config", config]
        started = time.perf_counter()
        done = subprocess.run(
            [*command, *options, "--json", str(report)], capture_output=True, text=True, env=os.environ | {}
        )
        seconds = time.perf_counter() - started
        if not report.exists():
            (folder / f"{name}.refused").write_text(f"exit {done.returncode}\n{done.stderr[-2000:]}")
        print(f"{name}: exit {done.returncode} in {seconds:.0f} s", flush=True)
    return 0


def rows_of(path: Path) -> list[tuple[str, str, str, str]]:
    """A report's rows as (group, stage, check, status), a failure's ``[first: ...]`` cut from its check
    (the same row names where it first diverged only when it fails)."""
    document = json.loads(path.read_text())
    return [(row["group"], row["stage"], row["check"].split(" [first: ")[0], row["status"]) for row in document["rows"]]


def compare(before: Path, after: Path) -> int:
    changed = 0
    names = sorted({path.stem for path in [*before.iterdir(), *after.iterdir()]})
    for name in names:
        sides = [(folder / f"{name}.json", folder / f"{name}.refused") for folder in (before, after)]
        kinds = [
            "report" if report.exists() else "refused" if refused.exists() else "absent" for report, refused in sides
        ]
        if kinds[0] != kinds[1]:
            print(f"{name}: {kinds[0]} -> {kinds[1]}")
            changed += 1
            continue
        if kinds[0] != "report":
            continue
        old, new = (dict(((group, stage, check), status) for group, stage, check, status in rows_of(report)) for
                    report, _ in sides)  # fmt: skip
        lines = [f"  {key}: {old[key]} -> {new[key]}" for key in old if key in new and old[key] != new[key]]
        lines += [f"  only before: {key} {old[key]}" for key in old if key not in new]
        lines += [f"  only after: {key} {new[key]}" for key in new if key not in old]
        if lines:
            print(f"{name}: {len(lines)} rows changed")
            print("\n".join(lines))
            changed += 1
    print(f"{len(names)} runs, {changed} changed")
    return 1 if changed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    writing = commands.add_parser("write")
    writing.add_argument("folder", type=Path)
    writing.add_argument("--only", action="append", choices=PORTS)
    comparing = commands.add_parser("compare")
    comparing.add_argument("before", type=Path)
    comparing.add_argument("after", type=Path)
    args = parser.parse_args()
    return write(args.folder, args.only) if args.command == "write" else compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
