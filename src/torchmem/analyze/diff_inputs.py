"""One input of a diff as plain figures: a :class:`Side` (no torch).

:func:`side_of` reads a capture (or any object with a capture's attributes: records or
dicts), :func:`side_of_snapshot` a CUDA snapshot's report. See :mod:`torchmem.analyze.diff`
for what each figure means and how the two sides are compared.
"""

from __future__ import annotations

import math
import os
import statistics
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from torchmem.model._serde import Record
from torchmem.model.census import module_of

__all__ = ["Side", "side_of", "side_of_snapshot", "module_of", "listed_elsewhere",
           "modules_from_storages", "field_value"]


@dataclass(frozen=True)
class Side(Record):
    """The figures of one input that a diff compares (plain data).

    Attributes:
        label: how the input is named in the report (its path as given).
        kind: ``capture`` or ``snapshot``.
        schema_version: the input's format version.
        tool: what recorded it (``torchmem run``, ``torchmem doctor``...).
        script: the script (first ``argv`` item); command: the whole ``argv``.
        devices: devices measured.
        peak: device -> peak bytes.
        growth: device -> bytes per step of a ``growing`` verdict, else 0.
        slope: device -> the fitted bytes per step whatever the verdict (None: too few steps).
        verdict: device -> ``growing``, ``flat`` or ``undecided``.
        steps: number of steps; step_source: what counted as a step.
        step_time: median seconds per step (None with fewer than 3 steps).
        roles: role -> bytes; modules: module -> bytes; module_source: where those came from.
        lines: per-line records as ``(key, file, line, code, allocated, alive, peak_share)``.
        line_measure: ``step`` (allocated per step / alive at its end) or ``peak``
            (alive at the peak: a snapshot's allocations by their innermost user frame).
        growth_unit: what growth is per: ``step``, or for snapshots ``s`` or
            ``1000 entries``.
        reserved: device -> peak reserved bytes, where known (snapshots).
        findings: the input's findings (records as in the capture).
        storages: the listed storages (``StorageSummary`` records).
        environment: versions and device names.
        series: device -> ``(step, bytes in use)`` at each step boundary the capture kept
            (empty for snapshots).
    """

    label: str
    kind: str = "capture"
    schema_version: int = 1
    tool: str = ""
    script: str = ""
    command: str = ""
    devices: tuple[str, ...] = ()
    peak: dict[str, int] = field(default_factory=dict)
    growth: dict[str, float] = field(default_factory=dict)
    slope: dict[str, float | None] = field(default_factory=dict)
    verdict: dict[str, str] = field(default_factory=dict)
    steps: int = 0
    step_source: str = "none"
    step_time: float | None = None
    roles: dict[str, int] = field(default_factory=dict)
    modules: dict[str, int] = field(default_factory=dict)
    module_source: str = ""
    lines: tuple[tuple[str, str, int, str, int, int, float], ...] = ()
    line_measure: str = "step"
    growth_unit: str = "step"
    reserved: dict[str, int] = field(default_factory=dict)
    findings: tuple[Any, ...] = ()
    storages: tuple[Any, ...] = ()
    environment: dict[str, str] = field(default_factory=dict)
    series: dict[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)


# -- reading one input ------------------------------------------------------------------
def field_value(obj: Any, name: str, default: Any = None) -> Any:
    """``obj.name``, or ``obj[name]`` for a mapping (inputs may be records or plain dicts)."""
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _modules(capture: Any) -> tuple[dict[str, int], str]:
    given = field_value(capture, "bytes_by_module")
    if isinstance(given, Mapping) and given:
        return {str(k): int(v) for k, v in given.items()}, "capture"
    storages = tuple(field_value(capture, "top_storages", ()) or ())
    return {}, (f"the {len(storages)} listed storages" if storages else "")


def listed_elsewhere(storage: Any, others: Sequence[Any]) -> bool | None:
    """Whether a storage of one input is listed in the other input's storages.

    True: a storage of the same name is listed. False: it is not, and it is larger than
    the smallest one listed there, so it would have been (lists are largest first).
    None: unknown, as the other list may have been cut before it.
    """
    name = field_value(storage, "name")
    if any(field_value(o, "name") == name for o in others):
        return True
    smallest = min((int(field_value(o, "nbytes", 0) or 0) for o in others), default=0)
    return False if int(field_value(storage, "nbytes", 0) or 0) > smallest else None


def modules_from_storages(a: Sequence[Any], b: Sequence[Any]) -> tuple[dict[str, int],
                                                                           dict[str, int]]:
    """Bytes by module from two lists of storages, counting a storage only where the
    other list says whether it exists there (see :func:`listed_elsewhere`)."""
    out: tuple[dict[str, int], dict[str, int]] = ({}, {})
    for mine, others, totals in ((a, b, out[0]), (b, a, out[1])):
        for s in mine:
            module = module_of(field_value(s, "name"), str(field_value(s, "role", "")))
            if module is None or listed_elsewhere(s, others) is None:
                continue
            totals[module] = totals.get(module, 0) + int(field_value(s, "nbytes", 0) or 0)
    return out


def _line_key(file: str, line: int, code: str, device: str) -> str:
    name = os.path.basename(file) or file
    where = code.strip() if code.strip() else f"#{line}"
    return f"{device}\0{name}\0{where}"


def _line_records(capture: Any) -> tuple[Any, ...]:
    value = field_value(capture, "lines")
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)):  # a profile object holding its records
        value = field_value(value, "records") or field_value(value, "lines") or ()
    return tuple(value)


def _lines(capture: Any) -> tuple[tuple[str, str, int, str, int, int, float], ...]:
    out: dict[str, tuple[str, str, int, str, int, int, float]] = {}
    for rec in _line_records(capture):
        file = str(field_value(rec, "file", "") or "")
        line = int(field_value(rec, "line", 0) or 0)
        code = str(field_value(rec, "code", "") or "")
        key = _line_key(file, line, code, str(field_value(rec, "device", "") or ""))
        made = int(field_value(rec, "allocated_bytes", 0) or 0)
        alive = int(field_value(rec, "alive_bytes", 0) or 0)
        share = float(field_value(rec, "peak_share", 0.0) or 0.0)
        if key in out:  # the same statement on two lines: one row
            old = out[key]
            made, alive, share = made + old[4], alive + old[5], share + old[6]
        out[key] = (key, file, line, code, made, alive, share)
    return tuple(out.values())


def _step_time(steps: Sequence[Any]) -> float | None:
    times = [float(s.time) for s in steps]
    gaps = [b - a for a, b in zip(times[1:], times[2:])]  # step 1 -> 2 is warm-up
    gaps = [g for g in gaps if g >= 0 and math.isfinite(g)]
    return statistics.median(gaps) if len(gaps) >= 2 else None


def side_of(capture: Any, label: str, kind: str = "capture") -> Side:
    """The :class:`Side` of a capture (or any object with a capture's attributes)."""
    from torchmem.analyze.growth import growth_by_device

    steps = tuple(field_value(capture, "steps", ()) or ())
    verdicts = tuple(field_value(capture, "growth", ()) or ())
    if not verdicts and steps:
        verdicts = tuple(growth_by_device(steps))
    growth, slope, verdict = {}, {}, {}
    for g in verdicts:
        growth[g.device] = float(g.bytes_per_step) if g.verdict == "growing" else 0.0
        fitted = not (g.verdict == "undecided" and not g.bytes_per_step and not g.r2)
        slope[g.device] = float(g.bytes_per_step) if fitted else None
        verdict[g.device] = g.verdict
    peak = {str(k): int(v) for k, v in (field_value(capture, "peak", {}) or {}).items()}
    devices = tuple(field_value(capture, "devices", ()) or ()) or tuple(peak)
    count = max(steps[-1].step, len(steps)) if steps else 0
    modules, module_source = _modules(capture)
    argv = tuple(field_value(capture, "argv", ()) or ())
    return Side(
        label=label, kind=kind, schema_version=int(field_value(capture, "schema_version", 1) or 1),
        tool=str(field_value(capture, "tool", "") or ""), script=str(argv[0]) if argv else "",
        command=" ".join(map(str, argv)),
        devices=devices, peak=peak, growth=growth, slope=slope, verdict=verdict, steps=count,
        step_source=str(field_value(capture, "step_source", "none") or "none"),
        step_time=_step_time(steps),
        roles={str(k): int(v)
               for k, v in (field_value(capture, "bytes_by_role", {}) or {}).items()},
        modules=modules, module_source=module_source, lines=_lines(capture),
        findings=tuple(field_value(capture, "findings", ()) or ()),
        storages=tuple(field_value(capture, "top_storages", ()) or ()),
        environment=dict(field_value(capture, "environment", {}) or {}),
        series=_series(steps),
    )


def _series(steps: Sequence[Any]) -> dict[str, tuple[tuple[int, int], ...]]:
    """device -> (step, bytes in use) at each recorded step boundary."""
    out: dict[str, list[tuple[int, int]]] = {}
    for record in steps:
        number = int(field_value(record, "step", 0) or 0)
        for device, used in (field_value(record, "used", {}) or {}).items():
            out.setdefault(str(device), []).append((number, int(used)))
    return {device: tuple(points) for device, points in out.items()}


def side_of_snapshot(report: Any, label: str) -> Side:
    """The :class:`Side` of a CUDA snapshot's report (:class:`~torchmem.model.snapshot
    .SnapshotReport`): peak allocated and reserved, the growth verdict across the trace
    (per second, or per 1000 entries without times), the findings, and the allocations
    alive at the peak by their innermost frame of the script (the ``lines``)."""
    peak: dict[str, int] = {}
    reserved: dict[str, int] = {}
    growth: dict[str, float] = {}
    slope: dict[str, float | None] = {}
    verdict: dict[str, str] = {}
    lines: dict[str, tuple[str, str, int, str, int, int, float]] = {}
    units = set()
    for d in report.devices:
        peak[d.device] = int(d.peak_allocated)
        reserved[d.device] = int(d.peak_reserved)
        if d.growth is not None:
            units.add(d.growth.unit)
            fitted = float(d.growth.bytes_per_unit)
            growth[d.device] = fitted if d.growth.verdict == "growing" else 0.0
            slope[d.device], verdict[d.device] = fitted, d.growth.verdict
        for site in d.top_at_peak:
            frames = site.user_frames or site.library_frames
            if not frames:
                continue
            f = frames[0]
            key = _line_key(f.filename, f.line, "", d.device)
            old = lines.get(key)
            alive = int(site.bytes) + (old[5] if old else 0)
            share = alive / d.peak_allocated if d.peak_allocated else 0.0
            lines[key] = (key, f.filename, f.line, f"in {f.name}", alive, alive, share)
    return Side(label=label, kind="snapshot",
                schema_version=int(getattr(report, "format_version", 1)),
                tool="CUDA memory snapshot", script=str(report.source),
                command=str(report.source), devices=tuple(d.device for d in report.devices),
                peak=peak, reserved=reserved, growth=growth, slope=slope, verdict=verdict,
                growth_unit=units.pop() if len(units) == 1 else "s",
                lines=tuple(lines.values()), line_measure="peak",
                findings=tuple(report.findings))
