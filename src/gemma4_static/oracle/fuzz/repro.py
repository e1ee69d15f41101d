"""A failing fuzz example as a standalone reproduction: a folder with the model in HF's format and a
short script that needs only the port's factory (and the port contract it takes) and transformers.
Run alone, it replays the calls and exits 1 at the same divergence, 0 once the port agrees."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import torch

from ...ports.registry import BUILT_IN
from ..results import tolerances
from .target import FuzzTarget

SCRIPT = '''"""Reproduces a divergence of port {port!r} from HF, found by gemma4-static fuzz ({date}):

    {message}

Run `python {name}` from anywhere: exit 1 while the port still diverges, 0 once it agrees with HF."""

import sys
from pathlib import Path

import torch
from transformers import {model_class}

from gemma4_static.ports import PortSetup, Prompt  # the contract the port's factory takes
{factory_import}

HERE = Path(__file__).resolve().parent
MAX_SEQ, BATCH = {max_seq}, {batch}
RELATIVE = {relative}  # float32: |ours - HF| <= RELATIVE * max(1, max |HF|) (only summation orders differ)
CALLS = {calls}

model = {model_class}.from_pretrained(HERE / "model").eval()
ports, port, histories = {{}}, None, []


def judge(row, position, ours, what):
    with torch.no_grad():
        ids = torch.tensor(histories[row])
        reference = model(input_ids=ids[None], attention_mask=torch.ones_like(ids)[None]).logits[0]
    bound = RELATIVE * max(1.0, float(reference[: position + 1].abs().max()))
    error = float((ours - reference[position]).abs().max())
    print(f"row {{row}} position {{position}} ({{what}}): max abs diff {{error:.3g}} (tolerance {{bound:.3g}})")
    if not error <= bound:
        sys.exit(f"DIVERGES at row {{row}} position {{position}} ({{what}})")


def greedy(ids, new):  # HF's greedy tokens, each step a forward over the whole history (no EOS)
    tokens = list(ids)
    for _ in range(new):
        history = torch.tensor(tokens)[None]
        tokens.append(int(model(input_ids=history, attention_mask=torch.ones_like(history)).logits[0, -1].argmax()))
    return tokens[len(ids) :]


def prompt_of(call):
    ids, mask = torch.tensor(call["input_ids"]), torch.tensor(call["attention_mask"])
    return Prompt(ids, mask, padding_side=call["padding_side"]), [row[m.bool()].tolist() for row, m in zip(ids, mask)]


with torch.no_grad():
    for call in CALLS:
        schedule = call.get("schedule")
        if "input_ids" in call and schedule not in ports:
            ports[schedule] = factory(model, PortSetup(MAX_SEQ, BATCH, prefill_schedule=schedule))
        if call["op"] == "prefill":
            port, (prompt, histories) = ports[schedule], prompt_of(call)
            result = port.prefill(prompt, keep_intermediates=call["intermediates"])
            every = None if result.all_logits is None else prompt.right_aligned(result.all_logits)
            for row, history in enumerate(histories):
                seen = [(len(history) - 1, result.logits[row], "last prompt token")]
                if call["intermediates"] and every is not None:
                    seen += [(position, every[row, position], "every position") for position in range(len(history))]
                start = 0
                for index, chunk in enumerate(call["chunks"]):
                    if result.chunk_logits is not None and len(history) > start:
                        end = min(start + chunk, len(history)) - 1
                        seen.append((end, result.chunk_logits[index][row], f"end of chunk {{index}}"))
                    start += chunk
                for position, logits, what in sorted(seen, key=lambda item: item[0]):
                    judge(row, position, logits, what)
        elif call["op"] == "decode":
            logits = port.decode(torch.tensor(call["ids"]))
            for row, token in enumerate(call["ids"]):
                histories[row].append(token[0])
                judge(row, len(histories[row]) - 1, logits[row], "decode step")
        elif call["op"] == "generate":
            port, (prompt, rows) = ports[schedule], prompt_of(call)
            ours = port.generate(prompt, max_new_tokens=call["new"])
            for row, history in enumerate(rows):
                theirs = greedy(history, call["new"])
                print(f"row {{row}} greedy: ours {{ours[row].tolist()}}, HF {{theirs}}")
                for step, (mine, hf) in enumerate(zip(ours[row].tolist(), theirs)):
                    if mine != hf:
                        sys.exit(f"DIVERGES at row {{row}} step {{step}} (greedy generation)")
            histories = [row + list(tokens[:-1]) for row, tokens in zip(rows, ours.tolist())]
        elif call["op"] == "refuse":
            fresh = factory(model, PortSetup(MAX_SEQ, BATCH)) if call["kind"] == "fresh decode" else None
            try:
                if call["kind"] == "prefill":
                    ports[None].prefill(prompt_of(call)[0])
                else:
                    (fresh or port).decode(torch.tensor(call["ids"]))
            except Exception as error:  # any error is a refusal
                print(f"refused, as it must: {{call['what']}} ({{type(error).__name__}})")
            else:
                sys.exit(f"ACCEPTED a call it must refuse: {{call['what']}}")
print("the port agrees with HF on every call")
'''


def factory_import(name: str) -> str:
    """The import line that binds the port's factory as ``factory`` (a file adapter loaded from its path)."""
    target = BUILT_IN.get(name, name)
    module, _, attribute = target.rpartition(":")
    if module.endswith(".py"):
        path = str(Path(module).resolve())
        return (
            "import importlib.util\n\n"
            f"_spec = importlib.util.spec_from_file_location('adapter', {path!r})\n"
            "_adapter = importlib.util.module_from_spec(_spec)\n"
            "_spec.loader.exec_module(_adapter)\n"
            f"factory = _adapter.{attribute}"
        )
    return f"from {module} import {attribute} as factory"


def _literal(call: dict[str, Any]) -> dict[str, Any]:
    """A call as plain Python values (what the script inlines): tensors as lists, a prompt as its ids,
    mask and padding side (text only: an image prompt's pixels are not inlined)."""
    literal: dict[str, Any] = {}
    for key, value in call.items():
        if key == "prompt":
            if value.pixel_values is not None:
                raise ValueError("a reproduction takes text prompts only (an image prompt's pixels are not inlined)")
            literal.update(
                input_ids=value.input_ids.tolist(),
                attention_mask=value.attention_mask.tolist(),
                padding_side=value.padding_side,
            )
        else:
            literal[key] = value.tolist() if isinstance(value, torch.Tensor) else value
    return literal


def write_reproduction(folder: Path, target: FuzzTarget, calls: list[dict[str, Any]], message: str) -> Path:
    """``folder/reproduce.py`` and ``folder/model`` (the model in HF's format) for ``calls``; the script's path."""
    folder.mkdir(parents=True, exist_ok=True)
    target.model.save_pretrained(folder / "model")
    script = folder / "reproduce.py"
    literals = ",\n    ".join(repr(_literal(call)) for call in calls)
    script.write_text(
        SCRIPT.format(
            port=target.name,
            date=datetime.date.today().isoformat(),
            message=message,
            name=script.name,
            model_class=type(target.model).__name__,
            factory_import=factory_import(target.name),
            max_seq=target.max_seq,
            batch=target.batch,
            relative=tolerances.RELATIVE[torch.float32],
            calls=f"[\n    {literals},\n]",
        )
    )
    return script
