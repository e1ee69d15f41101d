"""Whether a test's ``xdist_group`` mark took effect: under ``--dist loadgroup`` a grouped test's node
id carries its group (``...::test@group``), which is what sends the group to one worker. Where a
pytest/pytest-xdist pair loses that suffix, every worker would build the group's session fixtures
(a lowered ExecuTorch bundle, TICO's port, a browser) and the run would silently cost minutes more."""

from __future__ import annotations

from typing import Any


def lost_group(item: Any, loadgroup: bool) -> str | None:
    """Why ``item`` must not run (its group was lost on a loadgroup worker), else ``None``."""
    mark = item.get_closest_marker("xdist_group")
    if not loadgroup or mark is None or "@" in item.nodeid:
        return None
    return (
        f"xdist_group {mark.args[0]!r} did not take effect ({item.nodeid} has no '@' suffix): this pytest "
        "and pytest-xdist do not group under --dist loadgroup; install the pytest range pyproject.toml pins"
    )
