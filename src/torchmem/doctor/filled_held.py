"""Activations a container took at every step of a stretch and holds to the end of the run.

A list that keeps each step's output while part of the model trains (a freeze-out scheme
that replays the outputs of the first epoch, a "first pass" cache) grows by one batch's
activations per step, then stops growing when that stretch ends and keeps everything to
the end. The steps' memory rose, then levelled off, so the growth verdict reads a plateau,
and the path rule of :mod:`torchmem.doctor.path_trend` (growth in the last two intervals)
is quiet. Yet the memory held is as large as that stretch is long: with more batches per
epoch, more of them. :func:`filled_findings` reports it as ``growing_container`` when all
of these hold:

* between consecutive snapshots the path grew by at least
  :data:`~torchmem.doctor.path_trend.MIN_BYTES_PER_STEP` per step, with as many tensors
  with a ``grad_fn`` as tensors, in at least :data:`MIN_FILL_INTERVALS` intervals in a row,
  and it never shrank;
* after the last of them it stayed level (no tensor more or less, bytes within the same
  floor) over at least two intervals, to the last snapshot;
* it kept what it held: at every snapshot, every tensor sampled at the previous one was
  still alive (``survived`` 1: a buffer whose items are replaced is not this);
* its tensors are activations a backward already went through: they carry a ``grad_fn``,
  none of their nodes still holds saved tensors and some were freed by a backward (the
  graph can serve no further backward; a cache of inputs or of detached values, which a
  script keeps on purpose, has no ``grad_fn`` and is not reported);
* it explains most of the tensor memory that rose meanwhile: its growth over the stretch
  is at least :data:`MIN_SHARE` of the growth of live tensor storage between the
  snapshots of the stretch where that was measured, and it holds at least
  :data:`MIN_HELD` at the end;
* no other finding explains the run's memory.

The finding is growth that stopped, so its confidence is capped by the steps' verdict
(:func:`torchmem.doctor.confidence.calibrate`); its fix is advice (keep them detached, off
the device, or fewer of them), never an edit.
"""

from __future__ import annotations

from typing import Sequence

from torchmem.doctor.call_sites import caller_statement
from torchmem.doctor.path_trend import MIN_BYTES_PER_STEP
from torchmem.doctor.pathstats import PathStats, Snapshot
from torchmem.doctor.source import Statement, find_statements
from torchmem.doctor.statement_rank import best_statement
from torchmem.model.capture import Culprit, Finding
from torchmem.units import MiB, format_bytes

__all__ = ["filled_findings", "MIN_FILL_INTERVALS", "MIN_SHARE", "MIN_HELD", "TITLE"]

TITLE = "container filled at every step, then held to the end"
#: consecutive snapshot intervals in which the path must have grown
MIN_FILL_INTERVALS = 3
#: share of the rise of live tensor storage over the stretch the path must explain
MIN_SHARE = 0.5
#: bytes the path must hold at the end
MIN_HELD = 1 * MiB


def _stretch(series: list[tuple[int, PathStats]]) -> tuple[int, int] | None:
    """(first, last) snapshot index of the stretch over which ``series`` grew at every
    interval, when it then stayed level to the end (see the module), else None."""
    grew: list[bool] = []
    for (a_step, a), (b_step, b) in zip(series, series[1:]):
        steps = max(b_step - a_step, 1)
        d_bytes = (b.retained_bytes - a.retained_bytes) / steps
        d_tensors = b.tensors - a.tensors
        if d_tensors < 0 or d_bytes < -MIN_BYTES_PER_STEP or b.survived is None or b.survived < 1:
            return None  # released or replaced something: not kept
        if d_bytes >= MIN_BYTES_PER_STEP and d_tensors > 0 and b.grad_tensors - a.grad_tensors == d_tensors:
            grew.append(True)
        elif d_tensors == 0 and abs(d_bytes) < MIN_BYTES_PER_STEP:
            grew.append(False)
        else:
            return None
    if True not in grew:
        return None
    end = len(grew) - 1 - grew[::-1].index(True)  # the last growing interval
    start = end
    while start > 0 and grew[start - 1]:
        start -= 1
    if end - start + 1 < MIN_FILL_INTERVALS or len(grew) - 1 - end < 2:
        return None
    if any(grew[end + 1:]):
        return None
    return start, end + 1


def _activations(stats: PathStats) -> bool:
    """Tensors with a ``grad_fn`` whose graphs a backward already went through."""
    return (stats.tensors > 0 and stats.grad_tensors == stats.tensors and stats.live_nodes == 0
            and stats.freed_nodes > 0)


def _explains(snaps: Sequence[Snapshot], first: int, last: int, rise: int) -> bool:
    """Whether ``rise`` is at least :data:`MIN_SHARE` of the growth of live tensor storage
    between the first and the last snapshot of the stretch where it was measured."""
    measured = [s.unreached.tensor_bytes for s in snaps[first:last + 1] if s.unreached is not None]
    if len(measured) < 2:
        return False
    total = measured[-1] - measured[0]
    return total > 0 and rise >= MIN_SHARE * total


def _statement(stats: PathStats) -> tuple[Statement | None, Statement | None]:
    files = [f for f in (stats.owner_file, stats.file) if f]
    stmt = best_statement(find_statements(stats.path, files), "container",
                          function=stats.function, exact=stats.path)
    site = caller_statement(stmt, files) if stmt is not None else None
    return stmt, site[0] if site else None


def _candidates(walked: Sequence[Snapshot]) -> list[tuple[int, str, int, int]]:
    """(rise over the stretch, path, first, last snapshot index) of every path that was
    filled, then held (see the module)."""
    out = []
    for path, stats in walked[-1].paths.items():
        if stats.kind in ("hook", "grad") or not _activations(stats):
            continue
        if any(path not in s.paths for s in walked):
            continue
        series = [(s.step, s.paths[path]) for s in walked]
        stretch = _stretch(series)
        if stretch is None:
            continue
        first, last = stretch
        rise = series[last][1].retained_bytes - series[first][1].retained_bytes
        if stats.retained_bytes >= MIN_HELD and _explains(walked, first, last, rise):
            out.append((rise, path, first, last))
    return out


def filled_findings(snaps: Sequence[Snapshot], steps: int, explained: bool) -> list[Finding]:
    """The container that took activations at every step of a stretch and holds them to
    the end (see the module), or nothing."""
    walked = [s for s in snaps if s.paths]
    if explained or len(walked) < MIN_FILL_INTERVALS + 3:
        return []
    found = _candidates(walked)
    if not found:
        return []
    top = max(r for r, _, _, _ in found)
    # the deepest of the paths that explain most of the largest (the list, not its class)
    rise, path, first, last = max((f for f in found if f[0] >= 0.7 * top),
                                  key=lambda f: (walked[-1].paths[f[1]].depth, f[0]))
    stats = walked[-1].paths[path]
    start, stop, end = walked[first].step, walked[last].step, walked[-1].step
    held_from = walked[first].paths[path]
    per_step = rise / max(stop - start, 1)
    stmt, site = _statement(stats)
    shown = site or stmt
    culprit = Culprit(name=path, kind="container" if stats.depth else stats.kind,
                      file=shown.file if shown else stats.file,
                      line=shown.line if shown else None, code=shown.code if shown else None,
                      function=shown.function if shown else stats.function, type=stats.type)
    evidence = [
        f"`{path}` ({stats.type}) reached {held_from.tensors} tensors at step {start} and "
        f"{walked[last].paths[path].tensors} at step {stop}, {format_bytes(per_step)} per step "
        f"at every analysed step in between; then none more and none released up to step "
        f"{end}: everything it took is still held",
        f"{stats.tensors} tensors of {format_bytes(stats.retained_bytes)}, each with a grad_fn "
        f"whose graph a backward already went through ({stats.freed_nodes} nodes freed, none "
        f"still holding saved tensors): activations kept past their step; largest "
        f"{stats.example}",
        f"it grew for as long as that stretch ran (steps {start}-{stop}): what it holds is as "
        "large as the stretch is long (an epoch over more batches keeps more)",
    ]
    if site is not None and stmt is not None:
        evidence.insert(0, f"`{stmt.code}` (line {stmt.line}, in `{stmt.function}`) keeps what "
                           f"it is handed: the values come from `{site.code}` (line {site.line})")
    where = f" (line {shown.line}: `{shown.code}`)" if shown else ""
    fix = (f"`{path}` keeps one step's activations per step{where}: keep only what is needed "
           "later, detached (`.detach()`: the graph can serve no further backward), off the "
           "device (`.cpu()`) or on disk when all of them must be kept, or bound how many it "
           "keeps")
    return [Finding(
        cause="growing_container", title=TITLE, device="cpu", bytes=stats.retained_bytes,
        bytes_per_step=0.0, culprit=culprit, evidence=tuple(evidence), fix=fix,
        confidence="medium" if shown is not None else "low", fix_kind="advice",
        data={"items": stats.items, "tensors": stats.tensors, "grad_tensors": stats.grad_tensors,
              "graph_nodes": stats.graph_nodes, "freed_nodes": stats.freed_nodes,
              "example": stats.example, "storage_bytes": stats.storage_bytes,
              "fill_steps": [start, stop], "fill_bytes_per_step": round(per_step, 1),
              "snapshot_steps": [s.step for s in walked], "end_step": max(steps, end),
              "bytes_at_snapshot": stats.retained_bytes, "bytes_measure": "tensor_storage"})]
