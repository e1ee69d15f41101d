"""The check groups' names, read from their folder without importing any of them (nor torch): what
the command line offers before it runs anything (``verify --without``; ``--help`` stays fast)."""

from __future__ import annotations

import pkgutil
from pathlib import Path

GROUPS_FOLDER = Path(__file__).with_name("groups")


def group_names() -> tuple[str, ...]:
    """The names of the check groups: the modules of :mod:`.groups` (``_``-prefixed helpers aside),
    underscores as hyphens, in name order (their data-flow order is :data:`.groups.GROUPS`'s)."""
    modules = pkgutil.iter_modules([str(GROUPS_FOLDER)])
    return tuple(sorted(module.name.replace("_", "-") for module in modules if not module.name.startswith("_")))
