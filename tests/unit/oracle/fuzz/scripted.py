"""Episodes of the fuzzer's state machine scripted call by call: each rule run with its draws
answered by label, so a rule of the fuzzer is pinned by one deterministic episode of a few port
calls (the whole fuzzer, drawing, runs in ``test_runtime_state_machine.py``)."""

from __future__ import annotations

from typing import Any

from gemma4_static.oracle.fuzz import FuzzTarget
from gemma4_static.oracle.fuzz import machine as machine_module


class Scripted:
    """A stand-in for hypothesis's data object: each draw answered from ``answers`` by its label (an
    unanswered label is a ``KeyError``: the script must say what each draw is)."""

    def __init__(self, **answers: Any) -> None:
        self.answers = {label.replace("_", " "): value for label, value in answers.items()}

    def draw(self, strategy: Any, label: str | None = None) -> Any:
        return self.answers[label]


def drawable(condition: bool) -> None:
    """The scripted episode's stand-in for hypothesis's ``assume``: an episode the fuzzer would not draw is an error."""
    if not condition:
        raise ValueError("the script asks for an episode the fuzzer would not draw (its port refuses the chunks)")


def started(target: FuzzTarget, monkeypatch: Any, **options: Any) -> Any:
    """The fuzzer's state machine for ``target``, started (no call made yet); its hypothesis events
    (counted only inside a hypothesis run) ignored and its assumptions required while the test runs."""
    monkeypatch.setattr(machine_module, "event", lambda *args, **kwargs: None)
    monkeypatch.setattr(machine_module, "assume", drawable)
    machine = machine_module.machine_for(target, **options)()
    machine.start()
    return machine


def prefill(machine: Any, lengths: list[int], *, schedule: Any = None, padding: str = "right", keep: bool = False):
    """A prefill of a text prompt of ``lengths`` (no special ids) in ``schedule`` (``None``: the port's own)."""
    answers = {"lengths": lengths, "schedule": schedule, "seed": 0, "padding": padding, "intermediates": keep}
    machine.prefill(data=Scripted(**answers, special_ids_in_the_prompt=False))


def decode(machine: Any, steps: int, ids: list[int]) -> None:
    """``steps`` decode steps, each feeding ``ids`` (one per row)."""
    machine.decode(data=Scripted(steps=steps, ids=ids))


def generate(machine: Any, lengths: list[int], new: int, padding: str = "right") -> None:
    """Greedy generation of ``new`` tokens after a text prompt of ``lengths``."""
    machine.generate(data=Scripted(new_tokens=new, lengths=lengths, padding=padding))
