"""Which end of a list its new items went to: an ``append`` or an ``insert(0, ...)``.

Code often has both for one list (``if prepend: self.hooks.insert(0, h) else:
self.hooks.append(h)``), and the source alone cannot say which ran. The walk records the
identity of a list's (or deque's) first and last items at each snapshot (``id()`` only,
no reference; the items are alive, since the list holds them). Between two snapshots
where the list grew, a new last item and the same first one mean items were added at the
tail; a new first item and the same last one, at the head. :func:`at_end` keeps the
statements that add at that end.
"""

from __future__ import annotations

from typing import Sequence

from torchmem.doctor.pathstats import Snapshot
from torchmem.doctor.source import Statement

__all__ = ["growing_end", "at_end"]

#: methods that add at the head of a list or deque
_HEAD = ("appendleft", "extendleft")


def growing_end(snapshots: Sequence[Snapshot], path: str) -> str | None:
    """``"tail"`` or ``"head"``: where ``path``'s list gained items over the last interval
    between snapshots in which it grew; None when it cannot be told."""
    series = [s.paths[path] for s in snapshots if s.paths and path in s.paths]
    if len(series) < 2:
        return None
    before, now = series[-2], series[-1]
    if before.ends is None or now.ends is None or (now.items or 0) <= (before.items or 0):
        return None
    head, tail = before.ends[0] == now.ends[0], before.ends[1] == now.ends[1]
    if head and not tail:
        return "tail"
    if tail and not head:
        return "head"
    return None


def _adds_at_head(stmt: Statement) -> bool:
    if stmt.method in _HEAD:
        return True
    return stmt.method == "insert" and "insert(0," in stmt.code.replace(" ", "")


def at_end(statements: list[Statement], end: str | None) -> list[Statement]:
    """``statements`` without those that add at the other end of the list than ``end``
    (all of them when ``end`` is None or none would be left)."""
    if end is None:
        return statements
    head = end == "head"
    kept = [s for s in statements if s.kind != "add" or _adds_at_head(s) == head]
    return kept or statements
