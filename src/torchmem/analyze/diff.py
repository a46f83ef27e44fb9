"""Compare two runs: side-by-side figures and what explains the difference (no torch).

:func:`diff_captures` takes two captures (``torchmem run/doctor --json``; anything with the
same attributes works, see :class:`Side`) or two CUDA snapshot reports
(:func:`side_of_snapshot`) and returns a :class:`CaptureDiff`: the peak and
the growth per step of each device, the steps and the time per step, the bytes by role,
by module and by source line, the findings that appeared, vanished or changed, and the
explanations (:mod:`torchmem.analyze.diff_explain`), each stated with its numbers.
:func:`over_limits` checks a diff against ``--fail-over`` limits (:func:`parse_limit`).

What is compared, per input (the :class:`Side` of each):

* **peak**: ``peak[device]``; **growth/step**: the bytes per step of a ``growing``
  verdict (0 for ``flat`` or ``undecided``: noise is not growth). A capture without
  verdicts (``torchmem run``) gets them from its step records
  (:func:`torchmem.analyze.growth.growth_by_device`).
* **by module**: ``bytes_by_module`` when both inputs have it; otherwise derived from the
  listed storages' owner names (``blocks.0.fc1.weight``, ``grad of ...``, ``exp_avg of
  ...``), so it covers only the storages a capture lists (``Side.module_source`` says so),
  and a storage counts only where the other input's list shows whether it is there too
  (:func:`listed_elsewhere`: a list cut at its N largest says nothing of smaller ones).
* **by line**: the input's ``lines`` records, each with ``file``, ``line``, ``code``,
  ``allocated_bytes``, ``alive_bytes`` and ``peak_share`` (attributes or dict keys).
  Lines are matched on ``(device, file name, code)`` so that a commit that shifts line
  numbers still matches them; a line without code is matched on its number.

Cost: linear in the sizes of the two inputs (step records, storages, lines).
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from torchmem.analyze.diff_inputs import (
    Side,
    field_value,
    listed_elsewhere,
    module_of,
    modules_from_storages,
    side_of,
    side_of_snapshot,
)
from torchmem.model._serde import Record
from torchmem.units import format_bytes, format_delta, parse_bytes

__all__ = ["Side", "Row", "LineRow", "FindingChange", "Explanation", "CaptureDiff", "Limit",
           "side_of", "side_of_snapshot", "diff_captures", "parse_limit", "over_limits",
           "module_of", "listed_elsewhere"]

#: most rows kept in the module and line tables (largest changes first)
MAX_ROWS = 50


@dataclass(frozen=True)
class Row(Record):
    """One figure side by side: ``a`` and ``b`` (None where that input lacks it)."""

    key: str
    a: float | None
    b: float | None

    @property
    def change(self) -> float:
        """``b - a`` (a missing side counts as 0)."""
        return (self.b or 0) - (self.a or 0)

    @property
    def ratio(self) -> float | None:
        """``b / a`` where both are positive, else None."""
        if self.a and self.b and self.a > 0 and self.b > 0:
            return self.b / self.a
        return None


@dataclass(frozen=True)
class LineRow(Record):
    """One source line side by side (bytes allocated there, and still alive from there)."""

    where: str
    code: str
    allocated_a: int | None
    allocated_b: int | None
    alive_a: int | None
    alive_b: int | None
    share_a: float | None = None
    share_b: float | None = None

    @property
    def change(self) -> int:
        """The larger change of the two figures, signed (alive bytes first)."""
        alive = (self.alive_b or 0) - (self.alive_a or 0)
        allocated = (self.allocated_b or 0) - (self.allocated_a or 0)
        return alive if abs(alive) >= abs(allocated) else allocated


@dataclass(frozen=True)
class FindingChange(Record):
    """A finding present on one side only (``new``, ``gone``) or on both (``changed``)."""

    status: str
    cause: str
    title: str
    holder: str | None
    where: str | None
    bytes_a: int | None
    bytes_b: int | None
    per_step_a: float | None
    per_step_b: float | None


@dataclass(frozen=True)
class Explanation(Record):
    """One reason for the difference, derived from the data, with its numbers.

    Attributes:
        kind: ``new_holder``, ``vanished_holder``, ``holder_changed``, ``new_finding``,
            ``vanished_finding``, ``batch_size``,
            ``checkpointing``, ``activations``, ``model_size``, ``dtype``, ``optimizer_state``,
            ``growth``, ``line`` or ``unexplained``.
        text: the sentence.
        bytes: the size of the effect (for ordering; largest first).
    """

    kind: str
    text: str
    bytes: float = 0.0


@dataclass(frozen=True)
class CaptureDiff(Record):
    """Two runs side by side (see the module docstring)."""

    a: Side
    b: Side
    peak: tuple[Row, ...] = ()
    growth: tuple[Row, ...] = ()
    reserved: tuple[Row, ...] = ()
    steps: Row | None = None
    step_time: Row | None = None
    roles: tuple[Row, ...] = ()
    modules: tuple[Row, ...] = ()
    lines: tuple[LineRow, ...] = ()
    findings: tuple[FindingChange, ...] = ()
    explanations: tuple[Explanation, ...] = ()
    notes: tuple[str, ...] = ()


# -- comparing ------------------------------------------------------------------------------
def _rows(a: Mapping[str, float], b: Mapping[str, float], keys: Iterable[str] | None = None,
          limit: int | None = None) -> tuple[Row, ...]:
    names = list(keys) if keys is not None else list(dict.fromkeys([*a, *b]))
    rows = [Row(k, a.get(k), b.get(k)) for k in names]
    if limit is not None:
        rows = sorted(rows, key=lambda r: -abs(r.change))[:limit]
    return tuple(rows)


def _line_rows(a: Side, b: Side) -> tuple[LineRow, ...]:
    left = {rec[0]: rec for rec in a.lines}
    right = {rec[0]: rec for rec in b.lines}
    rows = []
    for key in dict.fromkeys([*right, *left]):
        ra, rb = left.get(key), right.get(key)
        shown = rb or ra
        assert shown is not None
        where = f"{os.path.basename(shown[1]) or shown[1]}:{shown[2]}"
        rows.append(LineRow(where=where, code=shown[3],
                            allocated_a=ra[4] if ra else None, allocated_b=rb[4] if rb else None,
                            alive_a=ra[5] if ra else None, alive_b=rb[5] if rb else None,
                            share_a=ra[6] if ra else None, share_b=rb[6] if rb else None))
    rows.sort(key=lambda r: -abs(r.change))
    return tuple(rows[:MAX_ROWS])


def _finding_key(f: Any) -> tuple[str, str]:
    culprit = field_value(f, "culprit")
    holder = field_value(culprit, "name") if culprit is not None else None
    return str(field_value(f, "cause", "")), str(holder or field_value(f, "title", ""))


def _finding_where(f: Any) -> tuple[str | None, str | None]:
    culprit = field_value(f, "culprit")
    if culprit is None:
        return None, None
    file, line = field_value(culprit, "file"), field_value(culprit, "line")
    where = f"{os.path.basename(file)}:{line}" if file and line else (
        os.path.basename(file) if file else None)
    return field_value(culprit, "name"), where


def _findings(a: Side, b: Side) -> tuple[FindingChange, ...]:
    left = {_finding_key(f): f for f in a.findings}
    right = {_finding_key(f): f for f in b.findings}
    out = []
    for key in dict.fromkeys([*right, *left]):
        fa, fb = left.get(key), right.get(key)
        shown = fb if fb is not None else fa
        holder, where = _finding_where(shown)
        status = "new" if fa is None else "gone" if fb is None else "changed"
        out.append(FindingChange(
            status=status, cause=key[0], title=str(field_value(shown, "title", key[0])),
            holder=holder, where=where,
            bytes_a=int(field_value(fa, "bytes", 0)) if fa is not None else None,
            bytes_b=int(field_value(fb, "bytes", 0)) if fb is not None else None,
            per_step_a=float(field_value(fa, "bytes_per_step", 0.0)) if fa is not None else None,
            per_step_b=float(field_value(fb, "bytes_per_step", 0.0)) if fb is not None else None))
    order = {"new": 0, "changed": 1, "gone": 2}
    out.sort(key=lambda c: order[c.status])
    return tuple(out)


def _module_figures(a: Side, b: Side) -> tuple[dict[str, int], dict[str, int]]:
    if a.module_source == "capture" and b.module_source == "capture":
        return a.modules, b.modules
    return modules_from_storages(a.storages, b.storages)


def diff_captures(a: Any, b: Any, *, a_label: str = "a", b_label: str = "b",
                  devices: Sequence[str] | None = None) -> CaptureDiff:
    """Compare two inputs (captures or :class:`Side` objects); ``a`` is the baseline.

    Args:
        a, b: the baseline and the new run.
        a_label, b_label: how the report names them (ignored for :class:`Side` inputs).
        devices: the devices to compare (default: every device either input measured).

    Returns:
        A :class:`CaptureDiff`, explanations included.
    """
    from torchmem.analyze.diff_explain import explain

    sa = a if isinstance(a, Side) else side_of(a, a_label)
    sb = b if isinstance(b, Side) else side_of(b, b_label)
    shown = list(devices) if devices else list(dict.fromkeys([*sa.devices, *sb.devices]))
    notes = []
    growth_devices = [d for d in shown if d in sa.growth or d in sb.growth]
    if sa.growth_unit != sb.growth_unit and growth_devices:
        notes.append(f"growth is per {sa.growth_unit} in {sa.label} and per "
                     f"{sb.growth_unit} in {sb.label}: not compared")
        growth_devices = []
    if sa.step_source != sb.step_source and sa.steps and sb.steps:
        notes.append(f"steps are counted differently ({sa.label}: {sa.step_source}, "
                     f"{sb.label}: {sb.step_source}): per-step figures compare unlike steps")
    if sa.steps != sb.steps and sa.steps and sb.steps:
        notes.append(f"{sa.label} ran {sa.steps} steps and {sb.label} {sb.steps}: peaks may "
                     "differ for that alone; growth/step compares")
    for name in ("torch", "python"):
        va, vb = sa.environment.get(name), sb.environment.get(name)
        if va and vb and va != vb:
            notes.append(f"{name} differs: {va} in {sa.label}, {vb} in {sb.label}")
    diff = CaptureDiff(
        a=sa, b=sb,
        peak=_rows(sa.peak, sb.peak, shown),
        growth=_rows(sa.growth, sb.growth, growth_devices),
        reserved=_rows(sa.reserved, sb.reserved,
                       [d for d in shown if d in sa.reserved or d in sb.reserved]),
        steps=Row("steps", sa.steps, sb.steps),
        step_time=Row("time/step", sa.step_time, sb.step_time),
        roles=_rows(sa.roles, sb.roles),
        modules=_rows(*_module_figures(sa, sb), limit=MAX_ROWS),
        lines=_line_rows(sa, sb),
        findings=_findings(sa, sb),
        notes=tuple(notes),
    )
    return dataclasses.replace(diff, explanations=tuple(explain(diff)))


# -- limits ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Limit:
    """A ``--fail-over`` limit: ``metric`` (``peak`` or ``growth``) may rise by at most
    ``amount``: a fraction of the baseline when ``relative``, else bytes (per step for
    growth)."""

    metric: str
    amount: float
    relative: bool
    text: str

    def exceeded(self, row: Row) -> bool:
        """Whether ``row`` (one device's figure) rose by more than this limit."""
        rise = row.change
        if rise <= 0:
            return False
        if not self.relative:
            return rise > self.amount
        base = row.a or 0
        return base <= 0 or rise > self.amount * base


def parse_limit(text: str) -> Limit:
    """Parse ``10%``, ``50MiB``, ``peak=10%`` or ``growth=64KiB`` into a :class:`Limit`.

    Without a metric, the limit is on the peak. A percentage is of the baseline's value
    (a baseline that does not grow has no percentage: any growth is over it).

    Raises:
        ValueError: not one of those forms (the message says what is expected).
    """
    raw = text.strip()
    metric, sep, amount = raw.partition("=")
    if not sep:
        metric, amount = "peak", raw
    metric = metric.strip().lower()
    amount = amount.strip()
    expected = ("expected a percentage or a byte quantity, optionally after peak= or growth= "
                f"(10%, 50MiB, growth=1MiB), got {text!r}")
    if metric not in ("peak", "growth"):
        raise ValueError(expected)
    if amount.endswith("%"):
        try:
            value = float(amount[:-1])
        except ValueError:
            raise ValueError(expected) from None
        if not math.isfinite(value) or value < 0:
            raise ValueError(expected)
        return Limit(metric, value / 100.0, True, raw)
    try:
        return Limit(metric, float(parse_bytes(amount)), False, raw)
    except (TypeError, ValueError):
        raise ValueError(expected) from None


def over_limits(diff: CaptureDiff, limits: Sequence[Limit]) -> list[str]:
    """One line per device and limit that the new run exceeds (empty: within every limit)."""
    out = []
    for limit in limits:
        rows = diff.peak if limit.metric == "peak" else diff.growth
        for row in rows:
            if row.a is None or row.b is None or not limit.exceeded(row):
                continue
            unit = f"/{diff.a.growth_unit}" if limit.metric == "growth" else ""
            pct = f" ({row.change / row.a:+.1%})" if row.a else ""
            what = "peak" if limit.metric == "peak" else "growth"
            out.append(f"{what} on {row.key} rose from {format_bytes(row.a)}{unit} to "
                       f"{format_bytes(row.b)}{unit}: {format_delta(row.change)}{unit}{pct}, "
                       f"over the --fail-over {limit.text} limit")
    return out
