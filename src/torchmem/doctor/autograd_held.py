"""Memory that autograd keeps after the script let go: named by the variable that held it.

Autograd's graphs live in C++. When a cycle closes inside them, nothing frees it: not
reference counting, and not Python's cyclic collector, which does not see C++
references. Two ways scripts close one:

* a ``saved_tensors_hooks`` pack hook that returns the tensor it is given (``lambda x:
  x``): the node keeps the packed value, which is the tensor, whose ``grad_fn`` is the
  node (pytorch#115255, inside a checkpoint);
* an in-place write into a tensor whose graph saved a view of that same tensor
  (``q[t] = r + gamma * (p * q[t + 1, :]).sum()``): the saved view keeps its base, whose
  ``grad_fn`` leads to the node that saved the view.

Every step's graph then stays alive, with the tensors it saved and the inputs it reached,
and the heap grows while no variable of the script holds more. What the doctor sees
(:func:`autograd_held_findings`), never from names:

* the heap grows steadily (the bar of ``untracked_growth``) and no finding other than
  about the script's variables explains it (graphs no variable reaches are not what a
  variable holds: beside such findings, each is sized by its own share,
  :func:`share_with_paths`);
* the live tensors that no walked path reaches grow, many of them with a ``grad_fn``
  (graphs only C++ keeps alive: :class:`~torchmem.doctor.pathstats.Unreached`);
* a variable's previous values stay alive though nothing reaches them any more, snapshot
  after snapshot (:attr:`~torchmem.doctor.pathstats.PathStats.orphaned`): that variable
  is the culprit (a tensor variable before a list of them).

The line is, when tensors are held by their own ``grad_fn`` through a pack hook, the one
``saved_tensors_hooks(...)`` call of the user's files; else the statement that writes
into the variable in place (``q[t] = ...``, ``q += ...``); else one that writes a value
computed from it into another tensor in place (``alpha[i] *= torch.pow(b, losses[i])``);
else the one that binds it.
The cause is ``reference_cycle`` (a cycle, inside autograd), with evidence that says so.
"""

from __future__ import annotations

import ast
from dataclasses import replace
from typing import Any, Sequence

from torchmem.doctor.hook_cycles import self_hook_site
from torchmem.doctor.pathstats import PathStats, Snapshot
from torchmem.doctor.self_view_writes import self_view_writes, self_writes
from torchmem.doctor.source import Statement, _reads, find_statements, load_tree, parse_path
from torchmem.doctor.statement_rank import best_statement
from torchmem.model.capture import Culprit, Finding, Growth
from torchmem.units import KiB, format_bytes

__all__ = ["autograd_held_findings", "share_with_paths", "TITLE"]

TITLE = "kept alive by a cycle inside autograd"
#: heap growth per step and fit the verdict needs (those of ``untracked_growth``)
MIN_PER_STEP = 8 * KiB
MIN_R2 = 0.9
#: snapshots in a row at which a variable's previous values were found orphaned
MIN_ORPHANED = 2


def _orphaned(snaps: Sequence[Snapshot]) -> list[tuple[str, PathStats, int]]:
    """(path, stats at the last snapshot, snapshots in a row ending at the last) of the
    paths whose previous values stayed alive unreached."""
    out = []
    last = snaps[-1]
    for path, stats in last.paths.items():
        if not stats.orphaned:
            continue
        run = 0
        for s in reversed(snaps):
            p = s.paths.get(path)
            if p is None or not p.orphaned:
                break
            run += 1
        if run >= MIN_ORPHANED:
            out.append((path, stats, run))
    return out


_TENSOR_TYPES = ("Tensor", "Parameter")


def _files(stats: PathStats) -> list[str]:
    return [f for f in (stats.owner_file, stats.file) if f]


def _in_place(path: str, stats: PathStats) -> list[Statement]:
    """The statements of the variable's function that write into a tensor variable in
    place (``q[t] = ...``, ``q += ...``)."""
    if stats.type not in _TENSOR_TYPES:
        return []
    return [s for s in find_statements(path, _files(stats))
            if s.kind in ("setitem", "augassign") and s.function == stats.function
            and _same(s.target, path)]


def _same(target: str | None, path: str) -> bool:
    """Whether the statement's target is the tensor at ``path`` itself (``q`` of
    ``q[t] = ...``), not the container that holds it (``self.kept`` of
    ``self.kept['last'] = out``, which stores the tensor and writes nothing into it)."""
    if target is None:
        return False
    try:
        return ast.unparse(ast.parse(target, mode="eval")) == ast.unparse(
            ast.parse(path, mode="eval"))
    except SyntaxError:
        return target == path


def _written_from(path: str, stats: PathStats) -> Statement | None:
    """The first statement of the variable's function that writes, in place, into another
    tensor a value computed from the variable (``alpha[i] *= torch.pow(b, losses[i])``):
    its graph keeps the variable's values, and the in-place write links it to the target."""
    wanted = parse_path(path)
    for file in dict.fromkeys(_files(stats)):
        parsed = load_tree(file)
        if parsed is None or not wanted:
            continue
        tree, lines = parsed
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                    or fn.name != stats.function:
                continue
            for node in ast.walk(fn):
                target = node.target if isinstance(node, ast.AugAssign) else (
                    node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Subscript) else None)
                if target is None or _reads(target, wanted) or not _reads(node.value, wanted):
                    continue
                code = lines[node.lineno - 1].strip() if 0 < node.lineno <= len(lines) else ""
                return Statement(file, node.lineno, code, "augassign" if isinstance(
                    node, ast.AugAssign) else "setitem", fn.name, True,
                    ast.unparse(node.value), ast.unparse(target))
    return None


def _hooks_site(files: list[str]) -> Statement | None:
    """The one ``saved_tensors_hooks(...)`` call in ``files`` (None: none, or several)."""
    found: list[Statement] = []
    for file in dict.fromkeys(f for f in files if f):
        parsed = load_tree(file)
        if parsed is None:
            continue
        tree, lines = parsed
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name == "saved_tensors_hooks":
                code = lines[node.lineno - 1].strip() if 0 < node.lineno <= len(lines) else ""
                found.append(Statement(file, node.lineno, code, "call", "", False))
    return found[0] if len(found) == 1 else None


def autograd_held_findings(snaps: Sequence[Snapshot], growth: Growth | None, steps: int,
                           explained: bool) -> list[Finding]:
    """A ``reference_cycle`` finding for memory autograd keeps (see the module docstring)."""
    if explained or growth is None or growth.verdict != "growing" or growth.stretches:
        return []  # a sawtooth: something lets go at each reset, not a graph nobody reaches
    if growth.bytes_per_step < MIN_PER_STEP or growth.r2 < MIN_R2:
        return []
    walked = [s for s in snaps if s.paths]
    series = [(s.step, s.unreached) for s in snaps if s.unreached is not None]
    if len(walked) < MIN_ORPHANED + 1 or len(series) < 2:
        return []
    (first_step, first), (last_step, last) = series[0], series[-1]
    span = max(last_step - first_step, 1)
    if last.graph_tensors - first.graph_tensors < 2 or last.tensors <= first.tensors:
        return []
    candidates = _orphaned(walked)
    if not candidates:
        return []
    writes = {path: _in_place(path, stats) for path, stats, _ in candidates}
    path, stats, run = max(candidates, key=lambda c: (c[1].type in _TENSOR_TYPES,
                                                      bool(writes[c[0]]), c[2], c[1].orphaned,
                                                      -c[1].depth))
    files = _files(stats)
    hooked = last.self_held > first.self_held
    stmt = _hooks_site(files) if hooked else None
    in_place = whole = False
    written = None
    self_hook = None
    elsewhere = None
    path_held = path
    if stmt is None:
        found = writes[path]
        in_place = bool(found)
        written = None if in_place else _written_from(path, stats)
        # a hook on a node that holds the object holding the node: the cycle's closing edge
        self_hook = None if in_place or written else self_hook_site(files)
        # the one write into a tensor from a view of itself elsewhere in the script
        views = [] if in_place or written or self_hook else self_view_writes(files)
        whole = not views and not (in_place or written or self_hook)
        if whole:  # a += a * y: the product saved `a`, the in-place add made it its output
            views = self_writes(files)
        elsewhere = views[0] if len(views) == 1 else None
        stmt = self_hook[0] if self_hook else written or elsewhere or best_statement(
            found or find_statements(path, files), "container", function=stats.function,
            exact=path)
    if elsewhere is not None:
        in_place, path_held, path = True, path, elsewhere.target or path
    culprit = Culprit(name=self_hook[1] if self_hook else path,
                      kind="hook" if self_hook else "local" if elsewhere else stats.kind,
                      file=stmt.file if stmt else stats.file,
                      line=stmt.line if stmt else None, code=stmt.code if stmt else None,
                      function=stmt.function if stmt else stats.function,
                      type=None if self_hook or elsewhere else stats.type)
    graphs = (last.graph_tensors - first.graph_tensors) / span
    evidence = [
        f"what `{path_held}` held at the previous snapshot is still alive at each of the last "
        f"{run} snapshots (step {walked[-1].step}: {stats.orphaned} of the tensors sampled "
        "there), though no variable of the script reaches it any more: something outside "
        "Python keeps each step's value",
        f"live tensors that no variable reaches: {first.tensors} at step {first_step}, "
        f"{last.tensors} at step {last_step} ({format_bytes(last.bytes)}); "
        f"{last.graph_tensors} of them have a grad_fn ({graphs:+.1f} per step): autograd "
        "graphs that only autograd's C++ keeps alive; gc.collect() does not free them "
        "(it does not see C++ references)",
        f"the C heap grows by {format_bytes(growth.bytes_per_step)} per step (steps "
        f"{growth.first_step}-{growth.last_step}, R^2 {growth.r2:.2f}): the graphs, what "
        "they saved and the inputs they reach",
    ]
    if hooked:
        evidence.append(f"{last.self_held} of those tensors are held by their own grad_fn: a "
                        "saved_tensors_hooks pack hook returned the tensor it was given, so "
                        "tensor -> grad_fn -> packed value -> tensor is a cycle"
                        + (f" (line {stmt.line}: `{stmt.code}`)" if stmt else ""))
        fix = ("a pack hook must not return the tensor it is given: autograd keeps what it "
               "returns, and that tensor keeps its graph. Remove the inner "
               "saved_tensors_hooks, or pack `t.detach()` (`lambda t: t.detach()`: the "
               "values without the graph) and check with the doctor that the growth is gone"
               + (f" (line {stmt.line}: `{stmt.code}`)" if stmt else ""))
    elif self_hook is not None and stmt is not None:
        evidence.append(f"`{stmt.code}` (line {stmt.line}, in `{stmt.function}`) stores "
                        f"`{self_hook[1]}` in an autograd node, and `{self_hook[1]}` holds "
                        f"`self`, whose `{path.split('.', 1)[-1]}` (and what it keeps) leads "
                        "back to that node: self -> tensor -> grad_fn -> hook -> self, a cycle "
                        "through C++ that Python's garbage collector cannot see")
        fix = (f"let the hook hold a weak reference (`ref = weakref.ref(self)` and call "
               f"`ref()` inside it, returning when it is None), or remove it after use "
               f"(keep the handle `{stmt.method}` returns and call `handle.remove()`) "
               f"(line {stmt.line}: `{stmt.code}`)")
    elif in_place and stmt is not None:
        saved = (f"`{path}` itself, the graph saved `{path}`" if elsewhere is not None and whole
                 else f"a view of `{path}`, the graph saved that view, the view keeps `{path}`")
        evidence.append(f"`{stmt.code}` (line {stmt.line}) writes into `{path}` in place while "
                        f"autograd records it: when what is written was computed from "
                        f"{saved}, and `{path}`'s grad_fn leads back to the graph"
                        + (f"; it is the only such write in the script (in `{stmt.function}`),"
                           f" and `{path_held}` held what the cycle keeps"
                           if elsewhere is not None else ""))
        fix = (f"compute what line {stmt.line} writes under `with torch.no_grad():` when no "
               f"gradient has to flow through it (a target value), or " + (
                   f"write it out of place (`{path} = {path} + ...` instead of `{path} += ...`)"
                   if elsewhere is not None and whole else
                   f"build `{path}` out of place (`torch.stack`/`torch.cat` of the parts) "
                   "instead of writing into it from a view of itself"))
    elif written is not None:
        evidence.append(f"`{written.code}` (line {written.line}) writes a value computed from "
                        f"`{path}` into `{written.target}` in place while autograd records it: "
                        f"the write's graph keeps `{path}`'s values, and a graph that saved a "
                        f"view of `{written.target}` leads back to it")
        fix = (f"write into `{written.target}` a value without graph: compute it from "
               f"`{path}` detached (`.detach()` where line {written.line} reads it), or run "
               f"line {written.line} under `with torch.no_grad():` when no gradient has to "
               "flow through it")
    else:
        fix = (f"no variable keeps `{path}`'s old values, autograd does: look for a cycle "
               "through the graph (an in-place write from a view of the same tensor, a "
               "saved_tensors_hooks pack hook that returns its input); `detach()` what is kept "
               "from one step to the next")
    at_end = int(growth.total_growth + growth.bytes_per_step * max(steps - growth.last_step, 0))
    data: dict[str, Any] = {"unreached_tensors": last.tensors, "unreached_bytes": last.bytes,
                            "graph_tensors": last.graph_tensors, "self_held": last.self_held,
                            "orphaned_snapshots": run, "heap_bytes_per_step": growth.bytes_per_step,
                            "snapshot_steps": [s for s, _ in series], "bytes_measure": "heap",
                            "held_by": "autograd"}
    return [Finding(cause="reference_cycle", title=TITLE, device="cpu", bytes=max(at_end, 0),
                    bytes_per_step=round(growth.bytes_per_step, 1), culprit=culprit,
                    evidence=tuple(evidence), fix=fix, fix_kind="advice", data=data,
                    confidence="high" if stmt is not None and (hooked or in_place or written)
                    else "medium")]


def _related(a: str, b: str) -> bool:
    """One path is the other or lies below it."""
    return a == b or any(a.startswith(b + hop) or b.startswith(a + hop) for hop in "[.:")


def share_with_paths(held: list[Finding], paths: list[Finding], growth: Growth | None
                     ) -> tuple[list[Finding], list[Finding]]:
    """``held`` beside the findings about variables (``paths``), each sized by its share.

    Graphs that no variable reaches cannot be what a variable holds, so a variable's
    finding and this one are two mechanisms, and fixing one leaves the other's growth.
    A path finding that took the heap's whole growth as its size (its tensors explained
    the growth, the heap grew faster) gets its own measure back; this finding takes the
    heap's growth less what the paths' own measures account for. ``held`` is dropped when
    its culprit is one of the paths' (or lies on one's path): then the paths say it."""
    if not held or not paths:
        return held, paths
    names = [f.culprit.name for f in paths if f.culprit is not None]
    if any(h.culprit is not None and any(_related(h.culprit.name, n) for n in names)
           for h in held):
        return [], paths
    own = []
    for f in paths:
        if f.data.get("bytes_measure") == "heap":
            rate = float(f.data.get("tensor_bytes_per_step", 0.0))
            last = f.evidence[-1] if f.evidence else ""
            note = last if last.startswith("the C heap grew") else None
            f = replace(f, bytes_per_step=round(rate, 1),
                        bytes=int(f.data.get("own_bytes", f.bytes)),
                        evidence=tuple(e for e in f.evidence if e is not note),
                        data={**f.data, "bytes_measure": "tensor_storage"})
        own.append(f)
    if growth is None:
        return held, own
    explained = sum(max(f.bytes_per_step, 0.0) for f in own)
    shared = []
    for h in held:
        rate = max(growth.bytes_per_step - explained, 0.0)
        share = rate / growth.bytes_per_step if growth.bytes_per_step > 0 else 0.0
        note = (f"of the heap's growth ({format_bytes(growth.bytes_per_step)} per step), the "
                f"variables of the other findings ({', '.join(f'`{n}`' for n in names)}) reach "
                f"{format_bytes(explained)} per step; this finding's share is the rest "
                f"({format_bytes(rate)} per step): fixing those leaves it")
        shared.append(replace(h, bytes_per_step=round(rate, 1), bytes=int(h.bytes * share),
                              evidence=h.evidence + (note,),
                              data={**h.data, "heap_share": round(share, 3),
                                    "beside": names}))
    return shared, own
