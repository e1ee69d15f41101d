"""A Circle graph run by onert in a child process: a graph that breaks onert's assumptions (a
malformed graph, such as one declaring two ranks for one tensor) may make it crash the process
rather than refuse, so a graph nobody here made is never loaded in the judge's own process. The
inputs go to the child as ``.npy`` files beside the graph, the outputs come back the same way;
onert's own message (it prints it on stderr, its exception says only ``NNFW_STATUS_ERROR``) is the
refusal's.

The children are forked by one server process per judge process, started on first use, which has
imported numpy and onert once (0.08 s a child otherwise, most of a small graph's run): each graph
still runs in a process of its own, which a crash ends, not the server. A server that does not
answer within :data:`SECONDS` is killed with its child, and the next graph starts another."""

from __future__ import annotations

import atexit
import contextlib
import os
import selectors
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

SECONDS = 600  # a graph of the largest embedded config runs in seconds; a hang is a refusal
# the server: for each line "folder<TAB>count" on stdin, fork a child that loads folder/graph.circle,
# runs it on input{i}.npy, saves output{i}.npy and writes how many outputs to folder/count (its
# stdout and stderr in folder/stdout and folder/stderr); answer the child's exit code (minus the
# signal that ended it) on stdout. numpy and onert only (where importing this package would take
# 2 s: torch); numpy's BLAS stops its threads before a fork (its own fork handler)
SERVER = r"""
import os, sys, traceback
from pathlib import Path
import numpy as np
from onert import infer

def run(folder, count):
    session = infer.session(str(folder / "graph.circle"), "cpu")
    outputs = session.infer([np.load(folder / f"input{index}.npy") for index in range(count)])
    for index, output in enumerate(outputs):
        np.save(folder / f"output{index}.npy", np.asarray(output))
    (folder / "count").write_text(str(len(outputs)))

for line in sys.stdin:
    name, count = line.rstrip("\n").split("\t")
    folder = Path(name)
    pid = os.fork()
    if pid == 0:
        for stream, descriptor in (("stdout", 1), ("stderr", 2)):  # stdout: the answers' pipe
            os.dup2(os.open(folder / stream, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), descriptor)
        code = 0
        try:
            run(folder, int(count))
        except BaseException:
            traceback.print_exc()
            code = 1
        sys.stderr.flush()
        os._exit(code)
    print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
"""


class OnertRefused(RuntimeError):
    """onert refused the graph (at load or prepare), failed running it or crashed: its message."""


class _Server:
    """The server process (its own session: killed with the child it waits for); its own stderr (what
    it says where it cannot start) in a file."""

    def __init__(self) -> None:
        self.stderr = tempfile.TemporaryFile("w+")  # noqa: SIM115 (closed with the server: close)
        self.process = subprocess.Popen(
            [sys.executable, "-c", SERVER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
            start_new_session=True,
        )

    def exit_code(self, folder: Path, count: int) -> int:
        """The exit code of the child that ran ``folder``'s graph (minus its signal); an
        :class:`OnertRefused` where the server gives no answer within :data:`SECONDS` or has ended
        (the server and its child killed)."""
        try:
            self.process.stdin.write(f"{folder}\t{count}\n")
            self.process.stdin.flush()
            with selectors.DefaultSelector() as selector:
                selector.register(self.process.stdout, selectors.EVENT_READ)
                answer = self.process.stdout.readline() if selector.select(SECONDS) else None
        except BrokenPipeError:
            answer = ""
        if answer is None:
            self.close(kill=True)
            raise OnertRefused(f"onert did not finish in {SECONDS} s")
        if not answer:  # its stdout closed: the server has ended, its last words written
            self.process.wait()
            self.stderr.seek(0)
            words = [line.strip() for line in self.stderr.read().splitlines() if line.strip()]
            self.close()
            raise OnertRefused(f"onert's server ended: {words[-1] if words else 'without a word'}")
        return int(answer)

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self, *, kill: bool = False) -> None:
        if kill and self.alive():
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(BrokenPipeError):
            self.process.stdin.close()
        self.process.wait()
        self.process.stdout.close()
        self.stderr.close()


_server: _Server | None = None


def _running_server() -> _Server:
    global _server
    if _server is None or not _server.alive():
        _server = _Server()
        atexit.register(_server.close)
    return _server


def run_isolated(graph: bytes, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """The outputs of Circle ``graph`` on ``tensors`` (its inputs in order), run by onert's CPU backend
    in a child process; an :class:`OnertRefused` with onert's message where it does not run."""
    with tempfile.TemporaryDirectory(prefix="gemma4-static-onert-") as name:
        folder = Path(name)
        (folder / "graph.circle").write_bytes(graph)
        for index, tensor in enumerate(tensors):
            np.save(folder / f"input{index}.npy", np.ascontiguousarray(tensor.detach().numpy()))
        code = _running_server().exit_code(folder, len(tensors))
        if code != 0:
            raise OnertRefused(_message(code, folder / "stderr"))
        count = int((folder / "count").read_text())
        return [torch.from_numpy(np.load(folder / f"output{index}.npy")) for index in range(count)]


def _message(code: int, stderr: Path) -> str:
    """onert's own lines from the child's stderr file (its prepare or load failure), else the last
    line; a crash by the signal that ended it."""
    if code < 0:
        return f"onert crashed (signal {-code})"
    lines = [line.strip() for line in stderr.read_text().splitlines() if line.strip()]
    own = [line for line in lines if "failed at line" in line or line.startswith(("Error", "Fail"))]
    return "; ".join(own) if own else (lines[-1] if lines else f"exit {code}")
