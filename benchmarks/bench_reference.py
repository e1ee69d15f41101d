"""What a recorded reference costs and saves, side by side in one run: per model, ``gemma4-static
record`` (its time and the folder's size), then verify of a port live (HF beside it) and from the
recording (HF not run), alternated so both see the same machine load; the ratio is printed with the
CPU. Each verify runs in its own process, as a user or a CI job runs it.

    python benchmarks/bench_reference.py [--models tiny e2b-geometry] [--port executorch-gemma4] [--repeats 1]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from timing import machine


def _run(arguments: list[str]) -> float:
    """Seconds of ``gemma4-static ARGUMENTS`` in a new process (its exit code must be 0 or 1: a verdict)."""
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "gemma4_static", *arguments, "--quiet"], capture_output=True)
    seconds = time.perf_counter() - start
    if result.returncode not in (0, 1):
        raise SystemExit(f"gemma4-static {' '.join(arguments)} exited {result.returncode}:\n{result.stderr.decode()}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["tiny", "e2b-geometry"])
    parser.add_argument("--port", default="executorch-gemma4")
    parser.add_argument("--repeats", type=int, default=1, help="verify runs per side (medians printed)")
    args = parser.parse_args()
    print(f"recorded references, port {args.port}; {machine()}")
    print(f"{'model':<14}{'record s':>10}{'folder MiB':>12}{'live s':>10}{'recorded s':>12}{'recorded/live':>15}")
    with tempfile.TemporaryDirectory() as scratch:
        for model in args.models:
            folder = Path(scratch) / model
            recorded = _run(["record", "--config", model, "--out", str(folder)])
            size = sum(path.stat().st_size for path in folder.iterdir()) / 2**20
            verify = ["verify", "--config", model, "--port", args.port]
            live, replayed = [], []
            for _ in range(args.repeats):
                live.append(_run(verify))
                replayed.append(_run([*verify, "--reference", str(folder)]))
            live_s, replayed_s = statistics.median(live), statistics.median(replayed)
            ratio = replayed_s / live_s
            print(f"{model:<14}{recorded:>10.1f}{size:>12.1f}{live_s:>10.1f}{replayed_s:>12.1f}{ratio:>15.2f}")


if __name__ == "__main__":
    main()
