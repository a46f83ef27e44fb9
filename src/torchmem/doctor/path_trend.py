"""Which snapshot paths keep growing, and where along a path the growth is best named.

A path's growth between two snapshots is its *signal* per step (bytes, tensors with
``grad_fn``, graph nodes, hooks, tensors, items: :func:`path_signal`). A path counts as
growing only when it grew in the last interval between snapshots *and* in the one before
(a cache that fills and then stops, or a bounded deque, is quiet), or when it holds
autograd graphs and grows again after each reset (an accumulator emptied every epoch).

A path whose content was released between two snapshots (an episode's list of
log-probabilities consumed by the episode's backward and emptied; a variable rebound each
step that holds one step's graph) does not count as growing (:func:`_released`).

The culprit of a growing variable is the deepest growing path below it that explains at
least 70% of its growth (:func:`culprit_paths`); the walk down stops at a module hook dict
that gains hooks (the registrations are the cause: what each stale hook keeps grows
because the hook is still there).
"""

from __future__ import annotations

from typing import Sequence

from torchmem.doctor.culprit import PathStats, Snapshot
from torchmem.doctor.fresh_values import rebound_fresh
from torchmem.units import KiB

__all__ = ["growing_paths", "culprit_paths", "hook_owner", "path_signal", "significant_growth", "score",
           "MIN_BYTES_PER_STEP", "MIN_COUNT_PER_STEP", "MIN_GRAPHS_PER_STEP"]

#: retained bytes per step below which a path's growth is ignored
MIN_BYTES_PER_STEP = 2 * KiB
#: graph nodes per step below which a growing graph is ignored
MIN_COUNT_PER_STEP = 0.5
#: tensors-with-graph (or hooks) kept per step below which growth is ignored (1 in 20 steps)
MIN_GRAPHS_PER_STEP = 0.05

def _rate(a: PathStats | None, b: PathStats, steps: int, attr: str) -> float:
    before = getattr(a, attr) if a is not None else 0
    return (getattr(b, attr) - before) / max(steps, 1)


def _signals(a: PathStats | None, b: PathStats, steps: int) -> dict[str, float]:
    return {
        "bytes": _rate(a, b, steps, "retained_bytes"),
        "storage": _rate(a, b, steps, "storage_bytes"),  # of those, the tensors' own
        "grad_tensors": _rate(a, b, steps, "grad_tensors"),
        "nodes": _rate(a, b, steps, "graph_nodes"),
        "hooks": _rate(a, b, steps, "hooks"),
        "tensors": _rate(a, b, steps, "tensors"),
        "items": (((b.items or 0) - ((a.items or 0) if a else 0)) / max(steps, 1)),
    }


def _significant(sig: dict[str, float]) -> bool:
    return (sig["bytes"] >= MIN_BYTES_PER_STEP or sig["grad_tensors"] >= MIN_GRAPHS_PER_STEP
            or sig["hooks"] >= MIN_GRAPHS_PER_STEP
            or (sig["nodes"] >= MIN_COUNT_PER_STEP and sig["bytes"] >= 0))


#: the growth of one path between two snapshots, per step (bytes, tensors, graph nodes...)
path_signal = _signals
#: whether such a growth clears the thresholds above
significant_growth = _significant


def _score(sig: dict[str, float]) -> float:
    return max(sig["bytes"], 0.0) + 256.0 * max(sig["grad_tensors"] + sig["hooks"] + sig["nodes"], 0.0)


def _graphs(sig: dict[str, float]) -> bool:
    return sig["grad_tensors"] > 0 or sig["nodes"] > 0


def _dropped(sig: dict[str, float]) -> bool:
    return sig["bytes"] < 0 or sig["nodes"] < 0 or sig["grad_tensors"] < 0 or sig["items"] < 0


def _path_trend(snaps: Sequence[Snapshot], path: str,
                sawtooth_rate: float | None = None) -> dict[str, float] | None:
    """The growth signal of ``path`` if it grows steadily, or grows again after each reset.

    Steady: it grew in the last interval and in the one before. Reset (an accumulator
    emptied each epoch): it holds autograd graphs, grew in the last interval (or the one
    before, when the last two snapshots fell on the same phase of the epoch), and an
    earlier interval shows the drop of a reset. A container without graphs counts as
    reset only when the steps' memory is itself a sawtooth and the container makes it
    (``sawtooth_rate``, see :func:`_refills`).
    """
    seq: list[dict[str, float] | None] = []
    for before, after in zip(snaps, snaps[1:]):
        a, b = before.paths.get(path), after.paths.get(path)
        seq.append(_signals(a, b, after.step - before.step) if a is not None and b is not None else None)
    if not seq or seq[-1] is None:
        return None
    last = seq[-1]
    prev = seq[-2] if len(seq) >= 2 else None
    drops = [i for i, sg in enumerate(seq) if sg is not None and _dropped(sg)]
    if _significant(last):
        if prev is None:
            return last if snaps[-1].step - snaps[-2].step >= 3 else None
        if _significant(prev) or (_score(prev) > 0 and _score(prev) >= 0.25 * _score(last)):
            return dict(last, resets=0.0)
        if _graphs(last) and drops and any(
                sg is not None and _significant(sg) and _graphs(sg) for sg in seq[:drops[-1]]):
            return dict(last, resets=float(len(drops)))
    elif (prev is not None and _score(last) == 0 and not _dropped(last) and _significant(prev)
            and _graphs(prev) and drops and drops[-1] < len(seq) - 2):
        return dict(prev, resets=float(len(drops)))
    elif (saw := _sawtooth(snaps, path, seq, drops)) is not None:
        return saw
    if not drops:
        return None
    return _chain_stretches(snaps, path, seq, drops) or (
        _refills(snaps, path, seq, drops, sawtooth_rate) if sawtooth_rate is not None else None)


def _sawtooth(snaps: Sequence[Snapshot], path: str, seq: list[dict[str, float] | None],
              drops: list[int]) -> dict[str, float] | None:
    """The growth signal of a path that the last snapshot caught just after a reset (a
    list that keeps every step's graph until the epoch ends, emptied when the next one
    starts): everything it held at the previous snapshot is gone (``survived`` 0), and
    before that it grew again after each reset, keeping autograd graphs that a backward
    already went through (``freed_nodes``: kept past their step, not waiting for an
    accumulated backward). Growth must show in at least two stretches between resets, in
    intervals over which it kept what it held (``survived`` above 0: a variable rebound
    every step to a new value whose graph merely varies in size, such as one episode's
    summed loss, is not an accumulator)."""
    last = snaps[-1].paths.get(path)
    if last is None or last.survived != 0 or not drops or drops[-1] != len(seq) - 1:
        return None
    stretches, grew, latest = 0, False, None
    for i, sg in enumerate(seq):
        if i in drops:
            stretches += grew
            grew = False
        elif sg is not None and _significant(sg) and _graphs(sg) and _kept(snaps[i + 1], path):
            grew, latest = True, sg
    if stretches < 2 or latest is None:
        return None
    peak = max((s.paths[path] for s in snaps if path in s.paths),
               key=lambda p: (p.graph_nodes, p.retained_bytes))
    if peak.freed_nodes == 0:
        return None
    return dict(latest, resets=float(len(drops)))


def _refills(snaps: Sequence[Snapshot], path: str, seq: list[dict[str, float] | None],
             drops: list[int], rate: float) -> dict[str, float] | None:
    """The growth signal of a container without graphs that makes the steps' sawtooth: in
    at least two stretches between drops it gained at least ``rate`` bytes of tensor
    storage per step while keeping what it held (``survived`` above 0). ``rate`` is half
    the heap's rise per step within the sawtooth's stretches: predictions or numbers kept
    for an epoch's metric are a small share and stay quiet. The last snapshot may fall
    anywhere in a stretch, just after a reset included."""
    if snaps[-1].paths[path].items is None:
        return None
    grew = [i for i, sg in enumerate(seq) if i not in drops and sg is not None
            and sg["bytes"] >= rate and not _graphs(sg) and _kept(snaps[i + 1], path)]
    if len({sum(1 for d in drops if d < i) for i in grew}) < 2:
        return None
    return dict(seq[grew[-1]] or {}, resets=float(len(drops)))


def _chain_stretches(snaps: Sequence[Snapshot], path: str, seq: list[dict[str, float] | None],
                     drops: list[int]) -> dict[str, float] | None:
    """The growth signal of a variable that chains one graph onto the next within every
    stretch of steps and is started afresh between them (``x = step(x)`` over the steps of
    a sampling call, the call repeated): the last snapshot may fall anywhere in a stretch.

    An interval counts when the path's graph grew and gained exactly ``k`` forward passes
    through the same parameters per step (``passes``, the same whole ``k >= 1`` for every
    interval that counts): each step's pass hangs on the previous one. A variable rebound
    each step to one step's graph keeps the same number of passes, or a number that
    varies with its input, not one that tracks the steps. At least two stretches between
    drops must show such intervals, three intervals in all, and the path must hold a
    chain of at least two passes at the last snapshot."""
    last = snaps[-1].paths.get(path)
    if last is None or last.passes < 2 or not drops:
        return None
    rates: dict[int, int] = {}
    counted: list[tuple[int, int]] = []  # (interval, passes gained per step)
    for i, sg in enumerate(seq):
        a, b = snaps[i].paths.get(path), snaps[i + 1].paths.get(path)
        if i in drops or sg is None or a is None or b is None:
            continue
        gained, steps = b.passes - a.passes, snaps[i + 1].step - snaps[i].step
        if gained >= steps > 0 and gained % steps == 0 and _significant(sg) and _graphs(sg):
            rates[gained // steps] = rates.get(gained // steps, 0) + 1
            counted.append((i, gained // steps))
    if not rates:
        return None
    k = max(rates, key=lambda r: rates[r])
    intervals = [i for i, r in counted if r == k]
    stretches = len({sum(1 for d in drops if d < i) for i in intervals})
    if stretches < 2 or len(intervals) < 3:
        return None
    return dict(seq[intervals[-1]] or {}, resets=float(len(drops)))


def _kept(snap: Snapshot, path: str) -> bool:
    stats = snap.paths.get(path)
    return stats is not None and stats.survived is not None and stats.survived > 0


def _released(stats: PathStats, sig: dict[str, float], one_step: Sequence[float] = ()) -> bool:
    """True when nothing the path held at the previous snapshot is still alive, and what it
    holds now is consumed or one step's worth: not accumulation.

    * a container (an episode's list of log-probabilities) whose content never outlived a
      step (``one_step``: at every snapshot where it was measured, none of what it held
      was alive at the next step boundary: filled and consumed within a step) and whose
      graphs were all backpropagated (no node holds its saved tensors); a list that keeps
      each step's loss until the epoch ends is not released;
    * one tensor rebound each step (``G = G.mean()``) whose count only seemed to grow
      because the snapshots fell on different phases, and whose graph holds one forward
      pass (a chain over k steps holds k passes through the same parameters).
    """
    if stats.survived is None or stats.survived > 0 or stats.kind == "grad":
        return False
    if stats.items is not None:
        return bool(one_step) and not any(one_step) and stats.live_nodes == 0
    return bool(sig.get("resets")) and stats.passes <= 1


def _growing_paths(snaps: Sequence[Snapshot],
                   sawtooth_rate: float | None = None) -> dict[str, dict[str, float]]:
    """Paths that keep growing (see :func:`_path_trend`), with their growth signal; paths
    whose content was released since the previous snapshot (:func:`_released`) are not.
    ``sawtooth_rate``: when the steps' memory is a sawtooth, half its rise per step
    within the stretches (containers without graphs that gain that much count)."""
    out: dict[str, dict[str, float]] = {}
    for path, stats in snaps[-1].paths.items():
        trend = _path_trend(snaps, path, sawtooth_rate)
        one_step = [p.survived_next for p in (s.paths.get(path) for s in snaps)
                    if p is not None and p.survived_next is not None]
        if trend is not None and not _released(stats, trend, one_step) \
                and not rebound_fresh(stats, _graphs(trend)) and not _bounded(stats, trend):
            out[path] = trend
    return out


def _bounded(stats: PathStats, sig: dict[str, float]) -> bool:
    """A container with a capacity (``deque(maxlen=N)``) that keeps no graphs: it fills up
    to ``N`` items and then stays level, however far from full the run ended. (One that
    keeps graphs still holds up to ``N`` of them, and is reported.)"""
    return stats.capacity is not None and not _graphs(sig)


def _children(path: str, candidates: dict[str, dict[str, float]], paths: dict[str, PathStats]) -> list[str]:
    depth = paths[path].depth
    return [p for p in candidates if paths[p].depth == depth + 1
            and p.startswith(path) and p[len(path):len(path) + 1] in (".", "[", ":")]


def _parent(path: str, growing: dict[str, dict[str, float]], paths: dict[str, PathStats]) -> str | None:
    """The growing path one hop above ``path`` (None: it is where the growth starts)."""
    depth = paths[path].depth
    for p in growing:
        if paths[p].depth == depth - 1 and path.startswith(p) and path[len(p):len(p) + 1] in (".", "[", ":"):
            return p
    return None


def _roots(growing: dict[str, dict[str, float]], paths: dict[str, PathStats]) -> list[str]:
    """Where growth starts: the growing variables, and growing entries or attributes of a
    variable that does not grow as a whole (the same name bound in two frames, or other
    entries dropped meanwhile); one per such variable, the fastest growing."""
    roots = [p for p in growing if paths[p].depth == 0]
    best: dict[str, str] = {}
    for path in growing:
        stats = paths[path]
        if stats.depth == 0 or _parent(path, growing, paths) is not None:
            continue
        if any(path.startswith(r) and path[len(r):len(r) + 1] in (".", "[", ":") for r in roots):
            continue  # below a growing variable: found by walking down from it
        key = stats.root
        if key not in best or _score(growing[path]) > _score(growing[best[key]]):
            best[key] = path
    return roots + list(best.values())


def _culprits(growing: dict[str, dict[str, float]], paths: dict[str, PathStats]) -> list[str]:
    chosen = []
    for path in _roots(growing, paths):
        current = path
        while True:
            if paths[current].kind == "hook" and growing[current].get("hooks", 0.0) > 0:
                break  # hooks registered again and again: the dict, not what one hook keeps
            if paths[current].cache is not None:
                break  # an lru_cache wrapper: the cache is the culprit, not its C internals
            kids = _children(current, growing, paths)
            best = max(kids, key=lambda k: _score(growing[k]), default=None)
            if best is None or _score(growing[best]) < 0.7 * _score(growing[current]):
                break
            current = best
        chosen.append(_spread_attribute(_hook_dict(current, growing, paths), growing, paths))
    return chosen


def _spread_attribute(path: str, growing: dict[str, dict[str, float]],
                      paths: dict[str, PathStats]) -> str:
    """For an object whose growth is spread over the same attributes of several objects of
    one class below it, each an attribute itself (each activation module's
    ``self.running_mean`` rebound with a graph: no one child explains 70%), the largest of
    those growing attributes: the statement that grows them is that class's, and it is
    found from any of them. Objects kept as entries of a container (meters filled per
    key) stay named as the container, where the call that fills them is found. Any other
    path is returned as it is."""
    below = [p for p in growing if p != path and p.startswith(path)
             and p[len(path):len(path) + 1] in (".", "[") and p in paths]
    leaves = [p for p in below if not _children(p, growing, paths)
              and paths[p].kind == "attribute" and "." in p[len(path):]]
    if len(leaves) < 2 or len(leaves) != len([p for p in below if not _children(p, growing, paths)]):
        return path
    owners = {p.rsplit(".", 1)[0] for p in leaves}
    if any(o not in paths or paths[o].kind != "attribute" for o in owners):
        return path  # entries of a container (objects filled per key) are named as one
    owner_types = {paths[o].type for o in owners}
    names = {p.rsplit(".", 1)[1] for p in leaves}
    if len(owners) < 2 or len(owner_types) != 1 \
            or any({p.rsplit(".", 1)[1] for p in leaves if p.startswith(o + ".")} != names
                   for o in owners):
        return path
    return max(leaves, key=lambda p: _score(growing[p]))


def _hook_dict(path: str, growing: dict[str, dict[str, float]], paths: dict[str, PathStats]) -> str:
    """For a module whose hooks grow spread over the hook dicts of its sub-modules (the
    same hooks registered on each of them, so no one child explains 70%), the growing hook
    dict that gains the most hooks per step, the shallowest of equals, then the one that
    keeps the most (``model._forward_hooks`` rather than ``model``): the registration statement is found
    from a hook dict. Any other path is returned as it is."""
    if paths[path].kind == "hook" or growing[path].get("hooks", 0.0) <= 0:
        return path
    dicts = [p for p in growing if paths[p].kind == "hook" and growing[p].get("hooks", 0.0) > 0
             and p.startswith(path) and p[len(path):len(path) + 1] in (".", "[", ":")]
    if not dicts:
        return path
    return max(dicts, key=lambda p: (growing[p]["hooks"], -paths[p].depth, _score(growing[p])))


def hook_owner(path: str, growing: dict[str, dict[str, float]],
               paths: dict[str, PathStats]) -> tuple[str, int] | None:
    """For a growing hook dict chosen by :func:`_hook_dict`, the growing path above it that
    gains the most hooks per step, the deepest of equals (the module whose sub-modules all
    get the same hooks), with the number of growing hook dicts below that path; None when the
    dict holds all the growth."""
    if path not in paths or paths[path].kind != "hook":
        return None
    rate = growing.get(path, {}).get("hooks", 0.0)
    above = [p for p in growing if p != path and path.startswith(p)
             and path[len(p):len(p) + 1] in (".", "[", ":")
             and growing[p].get("hooks", 0.0) > rate and p in paths]
    if not above:
        return None
    owner = max(above, key=lambda p: (growing[p]["hooks"], paths[p].depth))
    dicts = sum(1 for p in growing if p in paths and paths[p].kind == "hook"
                and growing[p].get("hooks", 0.0) > 0 and p.startswith(owner)
                and p[len(owner):len(owner) + 1] in (".", "[", ":"))
    return owner, dicts


#: the paths that keep growing, with their growth signal per step
growing_paths = _growing_paths
#: the culprit path of each place where growth starts
culprit_paths = _culprits
#: how much a growth signal weighs (bytes, and 256 bytes per graph, hook or node)
score = _score
