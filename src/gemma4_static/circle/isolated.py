"""A Circle graph run by onert in a child process: a graph that breaks onert's assumptions (a
malformed graph, such as one declaring two ranks for one tensor) may make it crash the process
rather than refuse, so a graph nobody here made is never loaded in the judge's own process. The
inputs go to the child as ``.npy`` files beside the graph, the outputs come back the same way;
onert's own message (it prints it on stderr, its exception says only ``NNFW_STATUS_ERROR``) is the
refusal's."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

SECONDS = 600  # a graph of the largest embedded config runs in seconds; a hang is a refusal
# the child: load folder/graph.circle, run it on input{i}.npy, save output{i}.npy, print how many outputs;
# numpy and onert only (0.15 s to start, where importing this package would take 2 s: torch)
CHILD = """
import sys
from pathlib import Path
import numpy as np
from onert import infer
folder, count = Path(sys.argv[1]), int(sys.argv[2])
session = infer.session(str(folder / "graph.circle"), "cpu")
outputs = session.infer([np.load(folder / f"input{index}.npy") for index in range(count)])
for index, output in enumerate(outputs):
    np.save(folder / f"output{index}.npy", np.asarray(output))
print(len(outputs))
"""


class OnertRefused(RuntimeError):
    """onert refused the graph (at load or prepare), failed running it or crashed: its message."""


def run_isolated(graph: bytes, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """The outputs of Circle ``graph`` on ``tensors`` (its inputs in order), run by onert's CPU backend
    in a child process; an :class:`OnertRefused` with onert's message where it does not run."""
    with tempfile.TemporaryDirectory(prefix="gemma4-static-onert-") as name:
        folder = Path(name)
        (folder / "graph.circle").write_bytes(graph)
        for index, tensor in enumerate(tensors):
            np.save(folder / f"input{index}.npy", np.ascontiguousarray(tensor.detach().numpy()))
        command = [sys.executable, "-c", CHILD, str(folder), str(len(tensors))]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=SECONDS, check=False)
        except subprocess.TimeoutExpired as error:
            raise OnertRefused(f"onert did not finish in {SECONDS} s") from error
        if done.returncode != 0:
            raise OnertRefused(_message(done))
        count = int(done.stdout.split()[-1])
        return [torch.from_numpy(np.load(folder / f"output{index}.npy")) for index in range(count)]


def _message(done: subprocess.CompletedProcess) -> str:
    """onert's own lines from the child's stderr (its prepare or load failure), else the last line; a
    crash by the signal that ended it."""
    if done.returncode < 0:
        return f"onert crashed (signal {-done.returncode})"
    lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
    own = [line for line in lines if "failed at line" in line or line.startswith(("Error", "Fail"))]
    return "; ".join(own) if own else (lines[-1] if lines else f"exit {done.returncode}")
