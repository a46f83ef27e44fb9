"""Memory the C heap keeps after frees: the process grows while nothing is in use.

A model run on inputs whose shape changes at every call (a ``Conv1d`` over batches of
random width) allocates and frees large blocks of a different size each time. glibc's
``malloc`` keeps freed blocks it cannot reuse for the next, differently sized request,
and the process's resident memory (RSS) climbs while the bytes in use stay level: no
variable keeps anything, no tensor leaks. :func:`heap_gap_findings` reports it as
``fragmentation`` on the CPU when all of these hold:

* RSS grows steadily over the steps (a Theil-Sen line through the RSS series after the
  warm-up: R^2 >= :data:`MIN_R2`, at least :data:`MIN_PER_STEP` per step, a rise above
  three times the noise, and the last half still rising: :func:`_rss_growth`);
* the C heap in use (``mallinfo2``) does not: its verdict is not ``growing`` and its
  slope is below :data:`MAX_SHARE` of RSS's;
* live tensor storage (every storage the gc scan sees) stays flat: it grows by less than
  :data:`MAX_SHARE` of RSS's growth per step, between the first and the last snapshot;
* shapes vary between steps: a variable rebound every step (nothing it held at one
  snapshot alive at the next) held tensors of at least :data:`MIN_SHAPES` different
  shapes at the snapshots;
* no other finding explains the growth.

Without any one of those it stays silent.
"""

from __future__ import annotations

from typing import Any, Sequence

from torchmem.analyze.growth import fit_line, warmup_steps
from torchmem.doctor.fixes import TITLES
from torchmem.doctor.pathstats import PathStats, Snapshot
from torchmem.doctor.source import best_statement, find_statements
from torchmem.model.capture import Culprit, Finding, Growth
from torchmem.units import KiB, format_bytes, format_delta

__all__ = ["heap_gap_findings", "MIN_PER_STEP", "MIN_R2", "MAX_SHARE", "MIN_SHAPES"]

#: RSS growth per step below which nothing is reported
MIN_PER_STEP = 64 * KiB
#: the RSS fit must be at least this good
MIN_R2 = 0.7
#: heap in use and tensor storage may grow by at most this share of RSS's growth
MAX_SHARE = 0.25
#: distinct shapes a rebound variable must have held
MIN_SHAPES = 3


def _varying(snaps: Sequence[Snapshot]) -> tuple[PathStats, list[str]] | None:
    """(stats, shapes) of the variable rebound every step whose tensors' shapes varied most."""
    best: tuple[PathStats, list[str]] | None = None
    seen: dict[str, list[str]] = {}
    last: dict[str, PathStats] = {}
    rebound: dict[str, bool] = {}
    for snap in snaps:
        for path, stats in snap.paths.items():
            if stats.depth != 0 or stats.items is not None or not stats.example:
                continue
            if stats.survived is not None:
                rebound[path] = rebound.get(path, True) and stats.survived == 0
            last[path] = stats
            shapes = seen.setdefault(path, [])
            if stats.example not in shapes:
                shapes.append(stats.example)
    for path, shapes in seen.items():
        if rebound.get(path) and len(shapes) >= MIN_SHAPES and (best is None or len(shapes) > len(best[1])):
            best = (last[path], shapes)
    return best


def _culprit(stats: PathStats) -> Culprit:
    """The variable whose shapes vary, at the statement of its function that binds it."""
    found = [s for s in find_statements(stats.path, [f for f in (stats.file,) if f])
             if s.function == stats.function]
    stmt = best_statement(found, "chain", function=stats.function, exact=stats.path)
    return Culprit(name=stats.path, kind=stats.kind, file=stmt.file if stmt else stats.file,
                   line=stmt.line if stmt else None, code=stmt.code if stmt else None,
                   function=stats.function, type=stats.type)


def _rss_growth(points: Sequence[tuple[int, float]]) -> Growth | None:
    """RSS's growth when it grows steadily, else None. RSS climbs in stairs (the heap
    grows by whole new regions), so the test that it still rises compares the last half's
    rise from end to end with the line's, instead of the last half's median slope: a
    staircase has flat treads, and a cache that fills and levels off has no rise."""
    window = list(points[warmup_steps(len(points)):])
    if len(window) < 8:
        return None
    xs = [float(x) for x, _ in window]
    ys = [y for _, y in window]
    fit = fit_line(xs, ys)
    span = xs[-1] - xs[0]
    half = len(window) // 2
    if fit.slope < MIN_PER_STEP or fit.r2 < MIN_R2 or fit.slope * span < 3 * fit.noise:
        return None
    if ys[-1] - ys[half] < 0.5 * fit.slope * (xs[-1] - xs[half]):
        return None
    first, last = window[0][0], window[-1][0]
    return Growth(device="cpu", verdict="growing", bytes_per_step=round(fit.slope, 1),
                  r2=round(fit.r2, 4), first_step=first, last_step=last,
                  total_growth=round(fit.slope * span),
                  reason=f"grows by {format_delta(fit.slope)} per step over steps "
                         f"{first}-{last} (R^2 {fit.r2:.2f})")


def heap_gap_findings(steps: Sequence[Any], heap: Growth | None, snaps: Sequence[Snapshot],
                      explained: bool) -> list[Finding]:
    """A ``fragmentation`` finding for the CPU (see the module docstring), or nothing."""
    if explained or heap is None or heap.device != "cpu" or heap.verdict == "growing":
        return []
    points = [(r.step, float(r.rss)) for r in steps if r.rss is not None and "cpu" in r.used]
    rss = _rss_growth(points)
    if rss is None:
        return []
    if heap.bytes_per_step >= MAX_SHARE * rss.bytes_per_step:
        return []
    series = [(s.step, s.unreached) for s in snaps if s.unreached is not None]
    if len(series) < 2:
        return []
    (s0, u0), (s1, u1) = series[0], series[-1]
    tensors_per_step = (u1.tensor_bytes - u0.tensor_bytes) / max(s1 - s0, 1)
    if tensors_per_step >= MAX_SHARE * rss.bytes_per_step:
        return []
    varying = _varying([s for s in snaps if s.paths])
    if varying is None:
        return []
    stats, shapes = varying
    path = stats.path
    shown = ", ".join(shapes[:4]) + (", ..." if len(shapes) > 4 else "")
    evidence = (
        f"the process's resident memory (RSS) {rss.reason}",
        (f"the C heap in use does not grow with it ({heap.reason}): what RSS gains is "
         "memory the allocator keeps after it was freed, not memory in use"),
        (f"live tensor storage stays flat: {format_bytes(u0.tensor_bytes)} at step {s0}, "
         f"{format_bytes(u1.tensor_bytes)} at step {s1}; no variable of the script accumulates"),
        (f"the shapes change between steps: `{path}`, rebound every step (it keeps nothing "
         f"from one step to the next), held tensors of {len(shapes)} different shapes at the "
         f"analysed steps ({shown}); blocks freed at one size are not reused for the next, "
         "differently sized request"),
    )
    fix = ("give the inputs a few fixed shapes (pad or bucket the varying dimension), or let "
           "glibc return freed blocks: run with `MALLOC_MMAP_THRESHOLD_=65536` (large blocks "
           "come from mmap and go back on free), or use jemalloc/tcmalloc through `LD_PRELOAD`")
    data = {"rss_bytes_per_step": rss.bytes_per_step, "rss_r2": rss.r2,
            "rss_growth": rss.total_growth, "heap_bytes_per_step": heap.bytes_per_step,
            "tensor_bytes_per_step": round(tensors_per_step, 1), "shapes": len(shapes),
            "varying_path": path, "bytes_measure": "rss"}
    return [Finding(cause="fragmentation", title=TITLES["fragmentation"], device="cpu",
                    bytes=max(int(rss.total_growth), 0), bytes_per_step=rss.bytes_per_step,
                    culprit=_culprit(stats),
                    evidence=evidence, fix=fix, data=data, confidence="medium",
                    fix_kind="advice")]
