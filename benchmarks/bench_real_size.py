"""The main job at a real size: ``gemma4-static verify --checkpoint DIR`` in each profile asked for,
each in its own process (as a user runs it), one after another on the same checkpoint; per profile
its wall time, the peak resident memory its report records, that peak over the checkpoint's size,
the estimate printed before loading, and the verdict's counts. The checkpoint is written first when
the folder holds none (``write_real_size_checkpoint.py``: E2B's text config exactly, or its first 10
layers).

    python benchmarks/bench_real_size.py DIR [--layers 35] [--profiles bfloat16 float32 a16w8]

A profile is a dtype (``float32``, ``bfloat16``, ``float16``) or an integer scheme (run as ``--quant
SCHEME``). The acceptance bounds printed beside: bfloat16 and float16 at most the checkpoint's size
plus 2 GB, float32 and the integer profiles at most twice it plus 2 GB.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from timing import machine
from write_real_size_checkpoint import write

from gemma4_static.oracle.references.checkpoints import open_checkpoint
from gemma4_static.oracle.references.models import e2b_real_text_config

DTYPES = ("float32", "bfloat16", "float16")
GB = 1e9


def profile_arguments(profile: str) -> list[str]:
    """``verify``'s arguments for ``profile``: ``--dtype D`` for a dtype, ``--quant S`` otherwise."""
    return ["--dtype", profile] if profile in DTYPES else ["--quant", profile]


def bound_bytes(profile: str, size_bytes: int) -> int:
    """The peak a profile may reach: the checkpoint plus 2 GB in its own dtype, twice it in float32."""
    return (size_bytes if profile in ("bfloat16", "float16") else 2 * size_bytes) + 2 * 10**9


def run(folder: Path, profile: str, scratch: Path) -> tuple[float, dict]:
    """Seconds and the JSON report of one ``verify --checkpoint`` in a new process (exit 0 or 1)."""
    report = scratch / f"{profile}.json"
    arguments = ["verify", "--checkpoint", str(folder), *profile_arguments(profile), "--json", str(report), "--quiet"]
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "gemma4_static", *arguments], capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if result.returncode not in (0, 1):
        raise SystemExit(f"gemma4-static {' '.join(arguments)} exited {result.returncode}:\n{result.stderr}")
    return seconds, json.loads(report.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--layers", type=int, default=35, choices=(10, 35), help="written when the folder is empty")
    parser.add_argument("--profiles", nargs="+", default=["bfloat16", "float32"])
    args = parser.parse_args()
    if not (args.folder / "config.json").is_file():
        started = time.perf_counter()
        write(args.folder, e2b_real_text_config(args.layers), seed=0)
        print(f"wrote {args.folder} in {time.perf_counter() - started:.0f} s")
    files = open_checkpoint(args.folder)
    size = files.size_bytes
    print(f"{args.folder}: {files.parameters / 1e9:.2f} billion parameters, {size / GB:.2f} GB; {machine()}")
    print(
        f"{'profile':<10}{'time s':>9}{'peak GB':>9}{'peak/size':>11}{'bound GB':>10}"
        f"{'estimate GB':>13}{'PASS':>6}{'FAIL':>6}{'SKIP':>6}"
    )
    with tempfile.TemporaryDirectory() as scratch:
        for profile in args.profiles:
            seconds, report = run(args.folder, profile, Path(scratch))
            memory, counts = report["metadata"]["memory"], report["counts"]
            peak = memory["peak_resident_bytes"]
            print(
                f"{profile:<10}{seconds:>9.0f}{peak / GB:>9.2f}{peak / size:>11.2f}"
                f"{bound_bytes(profile, size) / GB:>10.1f}{memory['estimate_bytes'] / GB:>13.1f}"
                f"{counts['PASS']:>6}{counts['FAIL']:>6}{counts['SKIP']:>6}",
                flush=True,
            )


if __name__ == "__main__":
    main()
