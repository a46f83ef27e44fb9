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
  slope is below :data:`MAX_SHARE` of RSS's -- or it does, as the growth nothing explains
  (an ``untracked_growth`` that names no call and no gradient): then what grows is memory
  native code keeps for each new input shape (kernels compiled per shape, such as the
  oneDNN primitive cache of CPU convolutions) besides the blocks the allocator cannot
  reuse, and the finding replaces that ``untracked_growth`` (:func:`with_heap_gap`);
* live tensor storage (every storage the gc scan sees) stays flat: it grows by less than
  :data:`MAX_SHARE` of RSS's growth per step (and of the heap's, when it grows), between
  the first and the last snapshot;
* shapes vary between steps: a variable rebound every step (nothing it held at one
  snapshot alive at the next) held tensors of at least :data:`MIN_SHAPES` different
  shapes at the snapshots;
* no other finding explains the growth.

Without any one of those it stays silent. The culprit is that variable, at the statement
that makes its shape or passes it to the model (:mod:`torchmem.doctor.shape_sites`).
"""

from __future__ import annotations

from typing import Any, Sequence

from torchmem.analyze.growth import fit_line, warmup_steps
from torchmem.doctor.fixes import TITLES
from torchmem.doctor.pathstats import PathStats, Snapshot
from torchmem.doctor.shape_sites import shape_site
from torchmem.doctor.source import find_statements
from torchmem.doctor.statement_rank import best_statement
from torchmem.model.capture import Culprit, Finding, Growth
from torchmem.units import KiB, format_bytes, format_delta

__all__ = ["heap_gap_findings", "with_heap_gap", "MIN_PER_STEP", "MIN_R2", "MAX_SHARE", "MIN_SHAPES"]

#: RSS growth per step below which nothing is reported
MIN_PER_STEP = 64 * KiB
#: the RSS fit must be at least this good
MIN_R2 = 0.7
#: heap in use and tensor storage may grow by at most this share of RSS's growth
MAX_SHARE = 0.25
#: distinct shapes a rebound variable must have held
MIN_SHAPES = 3


def _varying(snaps: Sequence[Snapshot]) -> tuple[PathStats, list[str]] | None:
    """(stats, shapes) of the variable rebound every step whose tensors' shapes varied most.
    Rebound: nothing it held at a snapshot was alive at a snapshot two steps or more
    later. A snapshot one step after the previous one is not judged (an iterator's
    result tuple, a prefetched batch keep the last value for one more step), nor the
    second one of the list (those after it may have been dropped: its predecessor is
    not known)."""
    best: tuple[PathStats, list[str]] | None = None
    seen: dict[str, list[str]] = {}
    last: dict[str, PathStats] = {}
    rebound: dict[str, bool] = {}
    for index, snap in enumerate(snaps):
        judged = index >= 2 and snap.step - snaps[index - 1].step >= 2
        for path, stats in snap.paths.items():
            if stats.depth != 0 or stats.items is not None or not stats.example:
                continue
            if stats.survived is not None and judged:
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
    """The variable whose shapes vary, at the statement that makes its shape or that
    passes it to the model (:func:`~torchmem.doctor.shape_sites.shape_site`)."""
    site = shape_site(stats.file, stats.function, stats.path)
    if site is not None:
        return Culprit(name=stats.path, kind=stats.kind, file=stats.file, line=site[0],
                       code=site[1], function=stats.function, type=stats.type)
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


def with_heap_gap(steps: Sequence[Any], heap: Growth | None, snaps: Sequence[Snapshot],
                  findings: list[Finding]) -> list[Finding]:
    """``findings`` with a ``fragmentation`` finding for the CPU when the evidence holds
    (see the module docstring). An ``untracked_growth`` that names nothing (the C heap
    grows, no variable, call or gradient explains it) is what native memory kept per
    input shape looks like: when the shapes vary, the fragmentation finding replaces it."""
    unnamed = next((f for f in findings
                    if f.cause == "untracked_growth" and f.culprit is None), None)
    others = [f for f in findings if f is not unnamed]
    found = heap_gap_findings(steps, heap, snaps, bool(others), per_shape=unnamed is not None)
    return others + found if found else findings


def heap_gap_findings(steps: Sequence[Any], heap: Growth | None, snaps: Sequence[Snapshot],
                      explained: bool, per_shape: bool = False) -> list[Finding]:
    """A ``fragmentation`` finding for the CPU (see the module docstring), or nothing.
    ``per_shape``: the heap's growth is established (an ``untracked_growth`` that names
    nothing), so a heap that grows with RSS is memory kept per input shape."""
    if explained or heap is None or heap.device != "cpu":
        return []
    grows = heap.verdict == "growing" and not heap.stretches  # a sawtooth falls back
    if grows and not per_shape:
        return []
    points = [(r.step, float(r.rss)) for r in steps if r.rss is not None and "cpu" in r.used]
    rss = _rss_growth(points)
    if rss is None:
        return []
    if not grows and heap.bytes_per_step >= MAX_SHARE * rss.bytes_per_step:
        return []
    series = [(s.step, s.unreached) for s in snaps if s.unreached is not None]
    if len(series) < 2:
        return []
    (s0, u0), (s1, u1) = series[0], series[-1]
    tensors_per_step = (u1.tensor_bytes - u0.tensor_bytes) / max(s1 - s0, 1)
    if tensors_per_step >= MAX_SHARE * max(rss.bytes_per_step, heap.bytes_per_step if grows else 0):
        return []
    varying = _varying([s for s in snaps if s.paths])
    if varying is None:
        return []
    stats, shapes = varying
    path = stats.path
    shown = ", ".join(shapes[:4]) + (", ..." if len(shapes) > 4 else "")
    tensors = (f"live tensor storage stays flat: {format_bytes(u0.tensor_bytes)} at step {s0}, "
               f"{format_bytes(u1.tensor_bytes)} at step {s1}; no variable of the script "
               "accumulates")
    if grows:
        heap_line = (f"the C heap in use grows with it ({heap.reason}) while no tensor is "
                     "kept: memory that native code keeps, not the script's tensors")
        why = ("native code keeps state for each new input shape (kernels compiled per "
               "shape, such as the oneDNN primitive cache of CPU convolutions, which holds up "
               "to 1024 by default), and blocks freed at one size are not reused for the "
               "next, differently sized request")
    else:
        heap_line = (f"the C heap in use does not grow with it ({heap.reason}): what RSS gains "
                     "is memory the allocator keeps after it was freed, not memory in use")
        why = ("blocks freed at one size are not reused for the next, differently sized "
               "request")
    evidence = (
        f"the process's resident memory (RSS) {rss.reason}",
        heap_line,
        tensors,
        (f"the shapes change between steps: `{path}`, rebound every step (it keeps nothing "
         f"from one step to the next), held tensors of {len(shapes)} different shapes at the "
         f"analysed steps ({shown}); {why}"),
    )
    culprit = _culprit(stats)
    where = f" (line {culprit.line}: `{culprit.code}`)" if culprit.line and culprit.code else ""
    fix = (f"give `{path}` a few fixed shapes (pad or bucket the varying dimension){where}"
           + (", or bound the per-shape kernel cache (`ONEDNN_PRIMITIVE_CACHE_CAPACITY=N`)"
              if grows else "")
           + "; glibc can return freed blocks: run with `MALLOC_MMAP_THRESHOLD_=65536` (large "
           "blocks come from mmap and go back on free), or use jemalloc/tcmalloc through "
           "`LD_PRELOAD`")
    data = {"rss_bytes_per_step": rss.bytes_per_step, "rss_r2": rss.r2,
            "rss_growth": rss.total_growth, "heap_bytes_per_step": heap.bytes_per_step,
            "heap_grows": grows,
            "tensor_bytes_per_step": round(tensors_per_step, 1), "shapes": len(shapes),
            "varying_path": path, "bytes_measure": "rss"}
    title = ("memory kept for each new input shape (native caches, allocator)" if grows
             else TITLES["fragmentation"])
    return [Finding(cause="fragmentation", title=title, device="cpu",
                    bytes=max(int(rss.total_growth), 0), bytes_per_step=rss.bytes_per_step,
                    culprit=culprit, evidence=evidence, fix=fix, data=data,
                    confidence="low" if grows else "medium", fix_kind="advice")]
