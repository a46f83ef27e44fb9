"""One report for every rank of a distributed run: the captures of all ranks, merged (no torch).

``torchmem doctor`` (or ``torchmem run``) under ``torchrun`` records one capture per rank
(``run.rank0.json``, ``run.rank1.json``...). A :class:`MergedRankReport` puts them side by
side: each rank's peak and growth per step on its device (:class:`RankSummary`), the
imbalance of the live tensor bytes by role (:class:`RoleSpread`), and the findings
compared across ranks (:class:`FindingAcrossRanks`): a leak on one rank only, the same
culprit holding more on one rank. Built by :func:`torchmem.analyze.ranks.merge_ranks`,
rendered by :mod:`torchmem.report.ranks_text` and :mod:`torchmem.report.ranks_html`,
saved as JSON (``kind`` :data:`KIND`) by ``torchmem report ... --json``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torchmem.model._serde import Record
from torchmem.model.capture import Culprit, Finding

__all__ = ["KIND", "RANK_REPORT_VERSION", "RankSummary", "RoleSpread", "FindingAcrossRanks",
           "MergedRankReport"]

#: the ``kind`` a merged report's JSON carries (a capture has ``tool`` instead)
KIND = "torchmem rank report"
#: version of the merged report's JSON format; bump on an incompatible change
RANK_REPORT_VERSION = 1


@dataclass(frozen=True)
class RankSummary(Record):
    """One rank's run, as the merged report compares it.

    Attributes:
        rank: global rank (``RANK`` of the run).
        source: where the capture came from (its file, or ``"rank 1 (shared at exit)"``).
        device: the device compared: the rank's accelerator if it used one, else ``cpu``.
        measure: what ``peak`` and the per-step figures count on that device
            (``"allocated"``, ``"C heap in use"``).
        peak: peak bytes on ``device`` over the run (None if not recorded).
        first: bytes in use at the first step boundary (None without steps).
        last: bytes in use at the last step boundary.
        verdict: the growth verdict on ``device`` (``growing``, ``flat``,
            ``undecided``; ``none`` without one).
        bytes_per_step: the growth verdict's slope (0 without one).
        steps: number of training steps the rank ran.
        step_numbers: step numbers of ``step_used`` (thinned to a few hundred points).
        step_used: bytes in use on ``device`` at those step boundaries.
        exit_code: the rank's exit code.
        outcome: how its script ended (``ok``, ``exception``, ``oom``...).
        duration_s: wall time of its run.
        bytes_by_role: live tensor bytes by role at the end (the doctor's census).
        findings: the doctor's findings on this rank, largest first.
    """

    rank: int
    source: str
    device: str
    measure: str
    peak: int | None = None
    first: int | None = None
    last: int | None = None
    verdict: str = "none"
    bytes_per_step: float = 0.0
    steps: int = 0
    step_numbers: tuple[int, ...] = ()
    step_used: tuple[int, ...] = ()
    exit_code: int = 0
    outcome: str = "ok"
    duration_s: float = 0.0
    bytes_by_role: dict[str, int] = field(default_factory=dict)
    findings: tuple[Finding, ...] = ()


@dataclass(frozen=True)
class RoleSpread(Record):
    """How one census role's bytes differ across ranks.

    Attributes:
        role: the census role (``parameter``, ``optimizer_state``, ``activation``...).
        bytes: the role's bytes on each rank, in the order of the report's ranks.
        heaviest: the rank holding the most (the lowest rank on a tie).
        lightest: the rank holding the least.
        spread: heaviest minus lightest, in bytes.
    """

    role: str
    bytes: tuple[int, ...]
    heaviest: int
    lightest: int
    spread: int


@dataclass(frozen=True)
class FindingAcrossRanks(Record):
    """One finding (same cause, same culprit at the same line) and the ranks that have it.

    Attributes:
        cause: the cause class (see :data:`torchmem.model.capture.CAUSES`).
        title: its human title.
        culprit: the culprit, as the first rank that has it names it.
        fix: the fix, as that rank words it.
        ranks: the ranks with this finding, in order.
        bytes: bytes at stake on each of those ranks.
        bytes_per_step: growth per step on each of those ranks.
        everywhere: whether every rank of the report has it.
        differs: whether it differs between ranks (missing on some, or bytes further
            apart than the report's tolerance).
        why: one phrase saying how it differs (``"on rank 1 only"``), or that it does not.
    """

    cause: str
    title: str
    culprit: Culprit | None
    fix: str
    ranks: tuple[int, ...]
    bytes: tuple[int, ...]
    bytes_per_step: tuple[float, ...]
    everywhere: bool
    differs: bool
    why: str


@dataclass(frozen=True)
class MergedRankReport(Record):
    """Every rank of one distributed run, side by side.

    Attributes:
        tool: the tool that recorded the captures (``torchmem doctor``, ``torchmem run``).
        argv: the script and its arguments (the same on every rank).
        world_size: ``WORLD_SIZE`` of the run.
        ranks: one summary per rank present, in rank order.
        missing: ranks of the run with no capture.
        roles: role spreads, largest first (empty when the captures have no census).
        findings: findings compared across ranks: those that differ first, then by bytes.
        tolerance: spread, as a fraction of the heaviest rank, above which ranks are
            called imbalanced (and a finding's bytes called different).
        notes: sentences about the merge itself (figures that cannot be compared...).
        kind: always :data:`KIND` (tells a merged report's JSON from a capture's).
        version: :data:`RANK_REPORT_VERSION`.
    """

    tool: str
    argv: tuple[str, ...]
    world_size: int
    ranks: tuple[RankSummary, ...]
    missing: tuple[int, ...] = ()
    roles: tuple[RoleSpread, ...] = ()
    findings: tuple[FindingAcrossRanks, ...] = ()
    tolerance: float = 0.1
    notes: tuple[str, ...] = ()
    kind: str = KIND
    version: int = RANK_REPORT_VERSION

    @property
    def script(self) -> str:
        """The script's path as given (``?`` if unknown)."""
        return self.argv[0] if self.argv else "?"

    def _peaked(self) -> list[RankSummary]:
        return [r for r in self.ranks if r.peak is not None]

    @property
    def heaviest(self) -> RankSummary | None:
        """The rank with the highest peak (the lowest rank on a tie); None without peaks."""
        peaked = self._peaked()
        return max(peaked, key=lambda r: (r.peak or 0, -r.rank)) if peaked else None

    @property
    def lightest(self) -> RankSummary | None:
        """The rank with the lowest peak (the lowest rank on a tie)."""
        peaked = self._peaked()
        return min(peaked, key=lambda r: (r.peak or 0, r.rank)) if peaked else None

    @property
    def peak_spread(self) -> int:
        """Bytes the heaviest rank's peak is above the lightest's (0 with < 2 ranks)."""
        high, low = self.heaviest, self.lightest
        if high is None or low is None:
            return 0
        return (high.peak or 0) - (low.peak or 0)

    @property
    def imbalanced(self) -> bool:
        """Whether the peaks differ by more than ``tolerance`` of the heaviest peak."""
        high = self.heaviest
        return (high is not None and (high.peak or 0) > 0
                and self.peak_spread > self.tolerance * (high.peak or 0))

    @property
    def growing(self) -> tuple[int, ...]:
        """The ranks whose memory grows per step."""
        return tuple(r.rank for r in self.ranks if r.verdict == "growing")

    def rank(self, rank: int) -> RankSummary:
        """The summary of ``rank``.

        Raises:
            KeyError: the report has no capture of that rank.
        """
        for summary in self.ranks:
            if summary.rank == rank:
                return summary
        raise KeyError(rank)
