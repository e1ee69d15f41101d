"""TICO's pass ``RemoveRedundantReshapePattern3`` (TICO 0.3.0) on a module of three lines: attention
whose mask is squeezed from rank 4 to rank 3 before the add. The pass drops the rank-changing
reshape, the ``ADD`` then declares rank 4 and the next ``BATCH_MATMUL`` rank 3: a malformed graph,
on which onert's behaviour is undefined: on the same bytes, seen here, it runs to a wrong shape
(``(1, 2, 8, 0)``, ``(1, 2, 8, 1)``), refuses it at prepare ("All tensor should have same dimension
except dimension on passed axis") or crashes (a segmentation fault: it runs in a child process
here). With the pass disabled the graph is right to float32 rounding.
A finding for TICO's maintainers (``docs/circle.md``); the test fails the day TICO fixes it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from gemma4_static.circle.graphs import circle_missing, convert, passes_disabled

pytestmark = [
    pytest.mark.ports,
    pytest.mark.skipif(circle_missing() is not None, reason=f"Circle graphs need {circle_missing()}"),
]
PASS = "RemoveRedundantReshapePattern3"


class SqueezedMaskAttention(torch.nn.Module):
    """Two heads as the batch of ``q``, ``k``, ``v`` ``(2, S, D)``, a ``(1, 1, S, S)`` mask squeezed to
    rank 3, the heads concatenated on the last dim: ``(1, S, 2 D)``."""

    def forward(self, q, k, v, mask):
        out = torch.softmax(q @ k.transpose(1, 2) + mask.squeeze(1), dim=-1) @ v
        return torch.cat([out[0:1], out[1:2]], dim=2)


def _inputs() -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 8, 4, generator=generator) for _ in range(3))
    return q, k, v, torch.triu(torch.full((8, 8), -1e9), 1)[None, None]


# runs a Circle file in onert on the inputs saved beside it, printing the output's shape and its max
# abs difference from the expected output (nan where the shapes differ)
CHILD = """
import sys, numpy as np
from onert import infer
folder = sys.argv[1]
inputs = [np.load(f"{folder}/input{index}.npy") for index in range(4)]
(output,) = infer.session(f"{folder}/graph.circle", "cpu").infer(inputs)
expected = np.load(f"{folder}/expected.npy")
error = float(np.abs(output - expected).max()) if output.shape == expected.shape else float("nan")
print(tuple(output.shape), error)
"""


def _run_alone(disabled: tuple[str, ...], folder: Path) -> subprocess.CompletedProcess:
    """The module converted (``disabled``: passes left out) and run by onert in a child process."""
    inputs = _inputs()
    graph = convert(SqueezedMaskAttention(), inputs, label="squeezed-mask attention", disabled=disabled)
    folder.mkdir()
    (folder / "graph.circle").write_bytes(graph.buffer)
    for index, tensor in enumerate(inputs):
        np.save(folder / f"input{index}.npy", tensor.numpy())
    np.save(folder / "expected.npy", SqueezedMaskAttention()(*inputs).numpy())
    return subprocess.run([sys.executable, "-c", CHILD, str(folder)], capture_output=True, text=True, check=False)


def test_the_pass_makes_a_graph_onert_runs_to_a_wrong_result(tmp_path, report):
    shipped, fixed = _run_alone((), tmp_path / "shipped"), _run_alone((PASS,), tmp_path / "fixed")
    assert fixed.returncode == 0, fixed.stderr[-2000:]
    shape, error = fixed.stdout.split(") ")
    assert shape + ")" == "(1, 8, 8)" and float(error) <= 1e-6, fixed.stdout  # float32 rounding of 8-term sums
    if shipped.returncode == 0:  # it ran: to another shape, or far off
        shape, error = shipped.stdout.split(") ")
        assert shape + ")" != "(1, 8, 8)" or float(error) > 1, shipped.stdout
    outcome = shipped.stdout.strip() or f"exit {shipped.returncode}: {shipped.stderr.strip().splitlines()[0]}"
    report(f"TICO {PASS}: onert gives {outcome} for (1, 8, 8); disabled: {fixed.stdout.strip()}")


def test_a_pass_that_does_not_exist_is_a_clear_error():
    unknown = r"disabled must name passes of tico.passes, got \['NoSuchPass'\]"
    with pytest.raises(ValueError, match=unknown), passes_disabled(("NoSuchPass",)):
        pass
