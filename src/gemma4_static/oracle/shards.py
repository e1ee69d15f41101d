"""One run split over machines: shard ``i`` of ``N`` (``verify --shard i/N``) runs every ``N``-th
check group and a share of the schedules grid's prompt lengths (balanced by the tokens run), the
grid planned whole first (its budget spent as the whole run spends it), so the shards' rows
together are the whole run's; ``gemma4-static merge`` (:mod:`.flow.merge`) joins their reports into
one verdict. Each check group declares how it is sharded (:attr:`.groups.CheckGroup.sharding`): the
overflow group reports the largest activations of the groups run before it, so every shard runs it
over its own and merge keeps each site's largest. A port's own checks (INFO rows) say what the
suite found in the shard that ran them. A mixture-of-experts model's routing is judged over a
whole run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (1-based) of ``count``."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if not isinstance(self.count, int) or not isinstance(self.index, int) or not 1 <= self.index <= self.count:
            raise ValueError(f"shard must be I/N with 1 <= I <= N, got {self.index}/{self.count}")

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``"2/4"`` as a shard; ``ValueError`` naming the text otherwise."""
        index, slash, count = str(text).partition("/")
        if not slash or not index.strip().isdigit() or not count.strip().isdigit():
            raise ValueError(f"shard must be I/N (e.g. 2/4), got {text!r}")
        return cls(int(index), int(count))

    def groups(self, names: list[str], every_shard: set[str]) -> list[str]:
        """The check groups of ``names`` (in order) this shard runs: those of ``every_shard`` (a group
        each shard runs, over its own part), and every ``count``-th of the others from its own."""
        others = [name for name in names if name not in every_shard]
        mine = set(others[self.index - 1 :: self.count])
        return [name for name in names if name in every_shard or name in mine]

    def share(self, costs: dict[Any, float]) -> set[Any]:
        """This shard's items of the split group (``costs``: item -> its cost, e.g. a prompt length ->
        the tokens its cases run): the costliest first, each to the shard with the least so far (the
        lowest index at a tie), so the shards end together; every item goes to exactly one shard."""
        loads = [0.0] * self.count
        mine = set()
        for item in sorted(costs, key=lambda item: (-costs[item], item)):
            shard = min(range(self.count), key=lambda index: (loads[index], index))
            loads[shard] += costs[item]
            if shard == self.index - 1:
                mine.add(item)
        return mine

    def as_dict(self) -> dict[str, int]:
        return {"index": self.index, "count": self.count}

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"
