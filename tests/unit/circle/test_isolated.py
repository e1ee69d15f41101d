"""onert's children and the server that forks them (:mod:`gemma4_static.circle.isolated`): a graph
that crashes its child leaves the server serving, a server that does not answer in time is killed
with its child, one that cannot start is a refusal naming what it said (the next graph starts
another server after either), and what a child prints is no answer."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import torch

from gemma4_static.circle import isolated
from gemma4_static.circle.graphs import circle_missing, convert
from gemma4_static.circle.isolated import SERVER, OnertRefused, run_isolated

pytestmark = pytest.mark.skipif(circle_missing() is not None, reason=f"Circle graphs need {circle_missing()}")


class Double(torch.nn.Module):
    def forward(self, x):
        return x * 2


@pytest.fixture(scope="module")
def doubling() -> bytes:
    return convert(Double(), (torch.ones(1, 4),), label="double", rewrites=False).buffer


def test_a_crash_ends_its_child_and_the_server_serves_the_next_graph(doubling):
    x = torch.arange(4.0).reshape(1, 4)
    run_isolated(doubling, [x])
    server = isolated._server.process.pid
    assert len(os.listdir(f"/proc/{server}/task")) == 1  # forks with no thread but its own
    with pytest.raises(OnertRefused, match=r"^onert crashed \(signal \d+\)$"):
        run_isolated(b"CIR0 not a graph", [x])
    (output,) = run_isolated(doubling, [x])
    assert torch.equal(output, 2 * x) and isolated._server.process.pid == server


def _ends(pid: int, seconds: float = 10.0) -> bool:
    """Whether process ``pid`` stops running within ``seconds`` (a kill is delivered, not awaited;
    a zombie left to its new parent no longer runs)."""
    stat, deadline = Path(f"/proc/{pid}/stat"), time.monotonic() + seconds
    while stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z":
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_a_server_that_does_not_answer_in_time_is_killed_with_its_child(doubling, monkeypatch, tmp_path):
    """A server whose child hangs (here: a child forked as the server starts, which sleeps, and a server
    that waits for it instead of answering) is killed with that child when the time is up; the next
    graph starts another server. The graph is sent once the child has said its pid: the time counts
    from the question, so a short one cannot end the server before its child exists."""
    child = tmp_path / "child"
    hangs = (
        "import os, sys, time\nif os.fork() == 0:\n"
        f"    open({str(child)!r} + '.part', 'w').write(str(os.getpid()))\n"
        f"    os.replace({str(child)!r} + '.part', {str(child)!r})\n    time.sleep(600)\n"
        "sys.stdin.readline()\nos.wait()\n"
    )
    monkeypatch.setattr(isolated, "SERVER", hangs)
    monkeypatch.setattr(isolated, "SECONDS", 0.2)
    monkeypatch.setattr(isolated, "_server", None)
    late = isolated._running_server()
    x = torch.ones(1, 4)
    try:
        deadline = time.monotonic() + 10
        while not child.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        with pytest.raises(OnertRefused, match=r"^onert did not finish in 0.2 s$"):
            run_isolated(doubling, [x])
        assert isolated._server is late and late.process.returncode == -9 and _ends(int(child.read_text()))
    finally:  # where the test failed before the timeout did it, the server and its sleeping child go
        late.close(kill=True)
    monkeypatch.setattr(isolated, "SERVER", SERVER)
    (output,) = run_isolated(doubling, [x])
    assert torch.equal(output, 2 * x) and isolated._server is not late


def test_what_a_child_prints_does_not_reach_the_servers_answers(doubling, monkeypatch):
    """The child's stdout is a file of its own: a child printing before it runs its graph (the
    server's own code, that one line added) is still answered and read right."""
    anchor = "def run(folder, count):\n"
    assert anchor in isolated.SERVER
    monkeypatch.setattr(isolated, "SERVER", isolated.SERVER.replace(anchor, anchor + "    print(7, flush=True)\n"))
    monkeypatch.setattr(isolated, "_server", None)  # a server of that code; the one before is back after
    x = torch.ones(1, 4)
    try:
        (output,) = run_isolated(doubling, [x])
        with pytest.raises(OnertRefused, match="onert crashed"):
            run_isolated(b"CIR0 not a graph", [x])
    finally:
        isolated._server.close()
    assert torch.equal(output, 2 * x)


def test_a_server_that_cannot_start_is_a_refusal_naming_its_last_words(doubling, monkeypatch):
    """A server whose onert cannot be imported ends at once: the graph is refused with what it said,
    and the next graph starts another server."""
    said = "import sys; print('a warning first', file=sys.stderr); raise SystemExit('onert cannot be imported here')"
    monkeypatch.setattr(isolated, "SERVER", said)
    monkeypatch.setattr(isolated, "_server", None)
    x = torch.ones(1, 4)
    with pytest.raises(OnertRefused, match=r"^onert's server ended: onert cannot be imported here$"):
        run_isolated(doubling, [x])
    ended = isolated._server
    assert ended.process.returncode == 1
    monkeypatch.setattr(isolated, "SERVER", SERVER)
    (output,) = run_isolated(doubling, [x])
    assert torch.equal(output, 2 * x) and isolated._server is not ended
