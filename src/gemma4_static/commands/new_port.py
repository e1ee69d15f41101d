"""``gemma4-static new-port NAME``: an adapter skeleton for a port of one's own (prefill and decode as
:class:`~gemma4_static.ports.core.NotExposed` stubs, and one commented stub per optional capability,
generated from the capability list) and a test file that runs the suite's check groups on it (from
the groups table). Until prefill and decode are filled in, ``verify`` says nothing was compared
(exit 5); each capability filled in shows in the coverage line."""

from __future__ import annotations

import argparse
import re
import textwrap
from pathlib import Path
from typing import Any

NAME = re.compile(r"[a-z][a-z0-9_-]*")

ADAPTER = '''"""{name}: a Gemma 4 port under the gemma4-static parity suite.

Fill in prefill and decode, then each capability your port has (the commented stubs below, one per
capability, each naming the check groups it feeds); a capability left out is reported as skipped
with the reason, never as passed. Conventions (HF's, so no check converts): ids (B, S) int64; a 0/1
attention_mask (B, S); masks {{layer_type: (B, 1, Q, K) bool}}, True = may attend; RoPE
{{layer_type: (cos, sin)}}, each (B, S, head_dim), rotate-half layout; hidden states (B, S, H);
logits (B, vocab) after the final softcap.
Run (from this folder): PYTHONPATH=. gemma4-static verify --port {module}:{cls}
"""

from __future__ import annotations

from typing import Any

import torch

from gemma4_static.ports import BatchLimits, Gemma4Port, NotExposed, PortLimits, PortPrefill, PortSetup, Prompt


class {cls}(Gemma4Port):
    name = "{name}"
    version = ""
    # what it accepts, by concern: batch and padding, max_seq, dtypes, images (and their fixed profiles),
    # chunks, integer schemes, contracts (see PortLimits)
    limits = PortLimits(batch=BatchLimits(max_batch=1, padding_side=None), dtypes=(torch.float32,))

    def __init__(self, model: Any, setup: PortSetup) -> None:
        """``model``: the HF Gemma 4 model whose weights to load (with your own converter); ``setup``:
        the static sizes this build must take (max_seq, batch, image slots, prefill schedule)."""
        self.setup = setup

    def prefill(self, prompt: Prompt, *, keep_intermediates: bool = False) -> PortPrefill:
        """Prefill prompt (a new conversation): PortPrefill(logits (B, vocab) at each row's last
        valid token); with keep_intermediates also hidden_states, per_layer_inputs, ... if you have them."""
        raise NotExposed(f"{{self.name}} does not expose its prefill yet")

    def decode(self, next_ids: torch.Tensor) -> torch.Tensor:
        """One token per row (B, 1) after the prefill, each row at its next position: (B, vocab)."""
        raise NotExposed(f"{{self.name}} does not expose its decode step yet")
{capabilities}'''

TEST = '''"""The gemma4-static parity suite on {name}: one test per check group, on the embedded tiny model
in float32 (the plugin's own test body). Run: pytest {test_file}"""

import pytest

from gemma4_static.commands.pytest_items import check_group
from gemma4_static.oracle.groups import names

PORT = "{module}:{cls}"


@pytest.mark.parametrize("group", names("float32"))
def test_{module}_through_each_check_group(group):
    check_group(PORT, "tiny", "float32", group)
'''


def capability_stubs() -> str:
    """One commented stub per method of every capability a port implements by overriding (from
    :func:`~gemma4_static.ports.capabilities.capabilities`), under a line naming the capability and the
    check groups that need or read it (from :data:`~gemma4_static.oracle.groups.GROUPS`)."""
    from ..oracle.groups import GROUPS
    from ..ports.capabilities import capabilities

    blocks = []
    for capability in capabilities():
        if not capability.methods:  # declared, not overridden (in its limits)
            continue
        groups = [group.name for group in GROUPS if capability in (*group.needs, *group.reads)]
        feeds = "; ".join(filter(None, [f"check groups {', '.join(groups)}" if groups else "", capability.uses]))
        lines = textwrap.wrap(f"-- {capability.name} ({feeds}): {capability.summary}", 100)
        lines = [f"    # {line}" for line in lines]
        for signature in capability.signatures():
            lines += [f"    # {signature.replace(chr(39), '')}:", "    #     ..."]
        blocks.append("\n".join(lines))
    return "\n" + "\n\n".join(blocks) + "\n"


def add_parser(commands: Any) -> None:
    """The ``new-port`` subcommand's arguments."""
    new_port = commands.add_parser("new-port", help="write an adapter skeleton and a test file for a port of your own")
    new_port.add_argument("name", help="the port's name, e.g. my-npu (module my_npu.py, class MyNpuPort)")
    new_port.add_argument("--folder", type=Path, default=Path("."), help="where the two files go (default: here)")


def skeleton(name: str, folder: Path) -> tuple[Path, Path, str]:
    """Write ``<module>.py`` and ``test_<module>.py`` for port ``name`` into ``folder``; the two paths
    and the port's ``module:Class``. A ``ValueError`` for a name that is no lowercase identifier or a
    file that exists already."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise ValueError(f"name must be lowercase letters, digits, '-' or '_', starting with a letter; got {name!r}")
    module = name.replace("-", "_")
    cls = "".join(part.capitalize() for part in module.split("_") if part) + "Port"
    adapter, test = folder / f"{module}.py", folder / f"test_{module}.py"
    existing = [str(path) for path in (adapter, test) if path.exists()]
    if existing:
        raise ValueError(f"new-port writes no file over another: {existing} exist already")
    folder.mkdir(parents=True, exist_ok=True)
    adapter.write_text(ADAPTER.format(name=name, module=module, cls=cls, capabilities=capability_stubs()))
    test.write_text(TEST.format(name=name, module=module, cls=cls, test_file=test.name))
    return adapter, test, f"{module}:{cls}"


def run_new_port(args: argparse.Namespace) -> int:
    """Write the two files and say how to run them (exit 0), or the usage error (exit 2)."""
    import sys

    try:
        adapter, test, factory = skeleton(args.name, args.folder)
    except ValueError as error:
        print(f"gemma4-static new-port: {error}", file=sys.stderr)
        return 2
    print(f"wrote {adapter} and {test}")
    print(f"check it: PYTHONPATH={adapter.parent} gemma4-static verify --port {factory}")
    print(f"or: pytest {test}")
    return 0
