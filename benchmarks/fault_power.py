"""The power of the schedules grid and of the fuzzer, shown on faults of a port's own shape
(:mod:`gemma4_static.oracle.faults.port_faults`): for each, whether ``verify``'s fixed groups (every
group but ``schedules``) catch it, whether the ``schedules`` grid does (its first failing row), and the
fuzzer alone (no shrinking): the examples and seconds to its first failure. Prints a Markdown table.

    python benchmarks/fault_power.py [--config tiny] [--max-examples 200] [--seed 0]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch

from gemma4_static.oracle.faults.port_faults import FAULTY_PORTS, MODULE
from gemma4_static.oracle.flow.verify import verify
from gemma4_static.oracle.fuzz import FuzzTarget, fuzz
from gemma4_static.oracle.groups import names
from gemma4_static.oracle.options import VerifyOptions
from gemma4_static.oracle.references.models import build_default_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="tiny")
    parser.add_argument("--max-examples", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    model = build_default_model(args.config)
    fixed = tuple(name for name in names() if name != "schedules")
    print("| fault | what goes wrong | fixed groups of verify | schedules grid | fuzzer alone: examples, seconds |")
    print("| --- | --- | --- | --- | --- |")
    for port in FAULTY_PORTS:
        name = f"{MODULE}:{port.__name__}"
        with torch.no_grad():
            rows = verify(model, VerifyOptions(port=name, groups=fixed)).rows
            grid = verify(model, VerifyOptions(port=name, groups=("schedules",))).rows
        caught = [row for row in rows if row.failed]
        failing = [row for row in grid if row.failed]
        with tempfile.TemporaryDirectory() as folder:
            result = fuzz(
                FuzzTarget.of(model, VerifyOptions(port=name)),
                max_examples=args.max_examples,
                seed=args.seed,
                database=Path(folder),
                shrink=False,
            )
        fuzzed = "not found" if result.first_failure is None else "{}, {:.1f} s".format(*result.first_failure)
        fixed_text = f"caught ({caught[0].stage})" if caught else "passes (exit 0)"
        grid_text = f"{len(failing)} of {len(grid) - 1} lengths fail" if failing else "passes"
        print(f"| `{port.name.removeprefix('fault: ')}` | {port.bug} | {fixed_text} | {grid_text} | {fuzzed} |")


if __name__ == "__main__":
    main()
