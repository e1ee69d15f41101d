"""The cyclic garbage collector as the suite leaves it for its tests (``tests/suite.py``): on, what
collecting imported frozen out of its passes, the youngest generation collected every 20,000
allocations."""

from __future__ import annotations

import gc


def test_the_collector_is_on_with_what_collecting_imported_frozen():
    """An xdist worker collects with the collector off; every test runs with it on again."""
    assert gc.isenabled()
    assert gc.get_threshold() == (20_000, 10, 10)
    assert gc.get_freeze_count() > 10_000  # torch's and transformers' objects, at least
