"""The measurement behind each low-precision profile's token bound (``oracle/gates.py``).

For every kernel set this CPU can run (``gemma4-static kernels``) and each thread count, a new
process runs ``verify``'s logit checks on the default models in each profile and reports the
margin shift (the most a gap among the top logits moved, in ulps; :mod:`gemma4_static.oracle.numerics.metrics`)
of the prefill logits at every valid position, the decode steps and, beside them, HF's own in the
same dtype, with how many top-1 decisions the profile's bound leaves decided. The bound of a profile
is twice the worst shift of ours over every row printed here.

    python benchmarks/token_bounds.py [--models tiny e2b-vision e2b-geometry] [--threads 1 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import torch

from gemma4_static.oracle.flow.verify import run_verification
from gemma4_static.oracle.numerics.gates import GATES
from gemma4_static.oracle.numerics.kernel_sets import KERNEL_SETS, active_kernels
from gemma4_static.oracle.options import VerifyOptions
from gemma4_static.oracle.references.models import build_default_model

STAGES = ("prefill logits", "decode steps")


def measure(models: list[str]) -> list[dict]:
    """This process's rows: per model, profile and stage, the margin shift (ours, HF) and the decided count."""
    found = []
    for name in models:
        model = build_default_model(name)
        for dtype in GATES:
            rows = run_verification(model, VerifyOptions(dtype=dtype, groups=("layers", "decode")))
            for stage in STAGES:
                shift = next(row for row in rows if row.stage == stage and row.metric == "margin shift (ulps)")
                top1 = next(row for row in rows if row.stage == stage and row.metric == "top-1 disagreements")
                found.append(
                    {
                        "model": name,
                        "profile": str(dtype).removeprefix("torch."),
                        "stage": stage,
                        "shift": shift.value,
                        "hf_shift": shift.hf,
                        "decided": top1.check.rsplit(", ", 1)[1],
                        "disagreements": top1.value,
                    }
                )
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["tiny", "e2b-vision", "e2b-geometry"])
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--one", action="store_true", help="measure in this process only, print JSON")
    args = parser.parse_args()
    if args.one:
        print(json.dumps({"kernels": active_kernels(), "rows": measure(args.models)}))
        return
    worst: dict[str, float] = {}
    print("| kernels | model | profile | stage | margin shift (ulps) ours \\| HF | top-1 decided | disagreements |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for kernel_set in KERNEL_SETS.values():
        reason = kernel_set.unsupported()
        if reason is not None:
            print(f"| {kernel_set.name} | skipped: {reason} | | | | | |")
            continue
        for threads in args.threads:
            env = {**kernel_set.environment(), "OMP_NUM_THREADS": str(threads)}
            command = [sys.executable, __file__, "--one", "--models", *args.models]
            result = json.loads(subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout)
            for row in result["rows"]:
                worst[row["profile"]] = max(worst.get(row["profile"], 0.0), row["shift"])
                print(
                    f"| {result['kernels']} | {row['model']} | {row['profile']} | {row['stage']} | "
                    f"{row['shift']:.2f} \\| {row['hf_shift']:.2f} | {row['decided']} | {row['disagreements']:g} |"
                )
    for profile, shift in worst.items():
        bound = GATES[getattr(torch, profile)].margin
        print(f"{profile}: worst margin shift of ours {shift:.2f} ulps; bound {bound:g} ulps ({bound / shift:.2f}x)")


if __name__ == "__main__":
    main()
