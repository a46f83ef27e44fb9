"""Memory of every rank of a distributed job, side by side (no torch).

A :class:`RankReport` is what :func:`torchmem.compare_ranks` returns on every rank: one
:class:`RankRow` per rank (its reading and, when asked, its live tensor bytes by role),
and the verdict on whether the ranks are balanced. Ranks of a data-parallel job run the
same code on same-sized data, so their memory should match; when one rank holds much
more, the role that differs says why (optimizer state kept on rank 0, metrics gathered
on rank 0, an uneven last batch...).
"""

from __future__ import annotations

from dataclasses import dataclass

from torchmem.model._serde import Record
from torchmem.model.readings import Reading
from torchmem.units import format_bytes

__all__ = ["RankRow", "RankReport", "FIGURE_NAMES"]

#: what each :attr:`Reading.used_source` measures, as the verdict words it
FIGURE_NAMES: dict[str, str] = {
    "allocated": "allocated memory",
    "tensor_bytes": "live tensor bytes",
    "heap": "C heap (all C allocations, not only tensors)",
    "rss": "resident memory (the whole process)",
}


@dataclass(frozen=True)
class RankRow(Record):
    """One rank's figures.

    Attributes:
        rank: global rank.
        host: host name of the process.
        reading: its :class:`~torchmem.model.readings.Reading` of the compared device.
        roles: live tensor bytes by census role on that device (``census=True``), or None.
    """

    rank: int
    host: str
    reading: Reading
    roles: dict[str, int] | None = None

    @property
    def used(self) -> int:
        """The reading's primary bytes-in-use figure (0 when the device offers none)."""
        return self.reading.used or 0


@dataclass(frozen=True)
class RankReport(Record):
    """Every rank's memory and whether they are balanced.

    Attributes:
        rows: one row per rank, in rank order.
        tolerance: the spread, as a fraction of the heaviest rank, above which the
            ranks are called imbalanced.
    """

    rows: tuple[RankRow, ...]
    tolerance: float = 0.1

    @property
    def heaviest(self) -> RankRow:
        """The rank using the most (the lowest rank on a tie)."""
        return max(self.rows, key=lambda r: (r.used, -r.rank))

    @property
    def lightest(self) -> RankRow:
        """The rank using the least (the lowest rank on a tie)."""
        return min(self.rows, key=lambda r: (r.used, r.rank))

    @property
    def spread_bytes(self) -> int:
        """Bytes the heaviest rank uses beyond the lightest."""
        return self.heaviest.used - self.lightest.used

    @property
    def imbalanced(self) -> bool:
        """Whether the spread exceeds ``tolerance`` of the heaviest rank's use."""
        top = self.heaviest.used
        return top > 0 and self.spread_bytes > self.tolerance * top

    @property
    def figure(self) -> str:
        """What was compared, in words (``"live tensor bytes"``, ``"allocated memory"``,
        ``"C heap (...)"``); ranks whose readings offer different figures are named
        ``"mixed figures (...)"``, since their comparison means little."""
        sources = list(dict.fromkeys(r.reading.used_source for r in self.rows))
        if len(sources) == 1:
            return FIGURE_NAMES.get(sources[0], sources[0])
        return f"mixed figures ({', '.join(sources)})"

    def role_spread(self) -> dict[str, int]:
        """``{role: heaviest rank's bytes - lightest rank's bytes}``, largest first
        (empty without ``census=True``)."""
        high, low = self.heaviest.roles, self.lightest.roles
        if high is None or low is None:
            return {}
        diff = {role: high.get(role, 0) - low.get(role, 0) for role in set(high) | set(low)}
        return dict(sorted(diff.items(), key=lambda kv: (-kv[1], kv[0])))

    def explain(self) -> str:
        """One line: balanced, or which rank holds how much more, and in which role."""
        if len(self.rows) < 2:
            return "one rank: nothing to compare"
        high, low = self.heaviest, self.lightest
        device = high.reading.device
        figure = self.figure
        if not self.imbalanced:
            return (f"balanced: {len(self.rows)} ranks within {format_bytes(self.spread_bytes)} "
                    f"of each other in {figure} on {device} (tolerance {self.tolerance:.0%})")
        share = self.spread_bytes / high.used
        line = (f"imbalanced: rank {high.rank} holds {format_bytes(self.spread_bytes)} more "
                f"{figure} than rank {low.rank} on {device} ({format_bytes(high.used)} vs "
                f"{format_bytes(low.used)}, {share:.0%} of the heaviest)")
        roles = self.role_spread()
        if roles:
            role, nbytes = next(iter(roles.items()))
            if nbytes > 0:
                line += f"; most of it is {role} ({format_bytes(nbytes)})"
        return line

    def __repr__(self) -> str:
        return f"RankReport({self.explain()})"
