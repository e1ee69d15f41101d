"""How the suite calls a port, and whose error an exception is: the port's (a finding, reported with
its traceback) or the oracle's (a bug of the checks, which must never count as a finding about the
port)."""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path

import torch

from ...ports import Gemma4Port, NotExposed, PortPrefill, PortSetup
from ..references.samples import Prompt
from ..results.report import Row, skip_row


class PortRaised(Exception):
    """The port under test raised while the suite built it (its factory): the port, the setup and
    the whole traceback."""

    def __init__(self, port: str, setup: PortSetup, error: BaseException) -> None:
        self.traceback = "".join(traceback.format_exception(error))
        super().__init__(f"port {port!r} raised in its factory for {setup}: {type(error).__name__}: {error}")


def guarded(stage: str, check: str, rows: Callable[[], Iterable[Row]]) -> list[Row]:
    """The rows of one check; one SKIP row with the reason when the port cannot answer it; one FAIL
    row with the port's traceback when the port raises (an error of the checks themselves propagates)."""
    try:
        return list(rows())
    except NotExposed as reason:
        return [skip_row(stage, check, str(reason))]
    except PortRaised as error:
        return [Row(stage, f"{check}: the port raised", "errors", 1, 0, detail=str(error), raised=error.traceback)]
    except Exception as error:
        if raised_in(error) == "oracle":
            raise
        where = traceback.extract_tb(error.__traceback__)[-1]
        raised = f"{type(error).__name__}: {error} ({Path(where.filename).name}:{where.lineno})"
        stack = "".join(traceback.format_exception(error))
        return [Row(stage, f"{check}: the port raised", "errors", 1, 0, detail=raised, raised=stack)]


def raised_in(error: BaseException) -> str:
    """``"oracle"`` when the innermost frame that raised and belongs to either side lies in the
    oracle (a broken check, which must never count as a finding about the port), else ``"port"``.
    A frame belongs to the port when it runs a method of a :class:`Gemma4Port` (an adapter anywhere,
    in a file of its own or in the ``executorch`` wheel) or lies in this package outside the oracle
    (the runtime, the built-in adapters); frames of torch, HF or the standard library count for
    neither."""
    package = Path(__file__).resolve().parents[2]
    innermost = "port"
    for frame, _ in traceback.walk_tb(error.__traceback__):
        path = Path(frame.f_code.co_filename).resolve()
        if isinstance(frame.f_locals.get("self"), Gemma4Port):
            innermost = "port"
        elif path.is_relative_to(package):
            innermost = "oracle" if path.is_relative_to(package / "oracle") else "port"
    return innermost


PLAIN = "last valid token per row, plain prefill"  # no intermediates asked: the path a deployment runs


def plain_prefill_logits(port: Gemma4Port, prompt: Prompt) -> torch.Tensor:
    """``port``'s logits ``(B, vocab)`` at each row's last valid token from a plain prefill of
    ``prompt``: asking for intermediates may run another code path, so the plain one is judged too."""
    return port.prefill(prompt).logits


def port_prefill(port: Gemma4Port, prompt: Prompt, *, keep_intermediates: bool = False) -> PortPrefill | Exception:
    """``port``'s prefill of ``prompt`` (laid out as the port takes it), its per-position outputs laid
    out right-padded as HF's; the port's own error instead when it raised (an error of the checks
    propagates)."""
    try:
        result = port.prefill(prompt, keep_intermediates=keep_intermediates)
    except Exception as error:
        if raised_in(error) == "oracle":
            raise
        return error
    if prompt.padding_side != "left":
        return result
    aligned = {
        name: None if value is None else prompt.right_aligned(value)
        for name, value in (("per_layer_inputs", result.per_layer_inputs), ("all_logits", result.all_logits))
    }
    states = None if result.hidden_states is None else tuple(map(prompt.right_aligned, result.hidden_states))
    return replace(result, hidden_states=states, **aligned)
