"""Hooks left registered that keep appending: the list they append to, and its statement.

A hook object registered on a module and never removed (a benchmark's activation hook,
a feature extractor's) appends what every forward gives it to a list of its own. When
the registrations come now and then (at each evaluation, at each fit) but the list of
every stale hook grows at every forward, the memory accrues at the append, not at the
registration: the culprit is that list, written through the hook dict into the hook
object (``model.act1._forward_hooks[3].activation_outputs``), at the statement that
appends to it (``self.activation_outputs.append(output)``); the fix is still to remove
the hooks (the registration is named in the advice).

:func:`stale_hook_list` decides from the snapshots (plain data): the hook dict held the
same number of hooks over one of the last two intervals between snapshots while what it
keeps grew over both, and an entry present at both of the last two snapshots gained
items in a list (dict, deque) attribute of its hook object (:attr:`PathStats.item_attrs`).
A hook dict that gains hooks at every interval (hooks registered again every step) is
left as it is: the registration is then where memory accrues, unless the script keeps
the handles of those hooks: :func:`kept_handles` finds an attribute of the same module
(``self.bwd_hooks``), or a list of ``RemovableHandle`` anywhere, that gained exactly as
many items as the hook dict over the last interval and holds as many. The script meant
to remove those hooks through their handles and its removal does not run for them: that
list, at its append, is what to look at.
"""

from __future__ import annotations

import ast
from typing import Sequence

from torchmem.doctor.list_ends import at_end, growing_end
from torchmem.doctor.pathstats import PathStats, Snapshot
from torchmem.doctor.source import Statement, find_statements, stem
from torchmem.doctor.statement_rank import best_statement

__all__ = ["stale_hook_list", "kept_handles"]


def _entries(snap: Snapshot, hook_dict: str) -> dict[str, PathStats]:
    depth = snap.paths[hook_dict].depth + 1
    return {p: s for p, s in snap.paths.items()
            if s.depth == depth and p.startswith(hook_dict + "[")}


def _appends(stmt: Statement, attr: str) -> bool:
    if stmt.kind not in ("add", "setitem") or not stmt.target:
        return False
    try:
        return stem(ast.parse(stmt.target, mode="eval").body) == ["self", attr]
    except SyntaxError:
        return False


def _growing_lists(hook_dict: str, snapshots: Sequence[Snapshot]
                   ) -> list[tuple[tuple[int, int], str, str]]:
    """((tensor storage gained, items gained), entry path, attribute) of the stale hooks of
    ``hook_dict`` whose list grew between the last two snapshots."""
    snaps = [s for s in snapshots if hook_dict in s.paths][-3:]
    if len(snaps) < 3:
        return []
    a, b, c = (s.paths[hook_dict] for s in snaps)
    if a.hooks < b.hooks and b.hooks < c.hooks:
        return []  # registered again in every interval: the registration is the cause
    if not (a.retained_bytes < b.retained_bytes < c.retained_bytes):
        return []
    before, now = _entries(snaps[1], hook_dict), _entries(snaps[2], hook_dict)
    out = []
    for path, stats in now.items():
        old = before.get(path)
        if old is None:
            continue  # registered since: not a stale hook
        lengths = dict(old.item_attrs)
        for attr, n in stats.item_attrs:
            gained = n - lengths.get(attr, n)
            if gained > 0:
                out.append(((stats.storage_bytes - old.storage_bytes, gained), path, attr))
    return out


def stale_hook_list(hook_dicts: Sequence[str], snapshots: Sequence[Snapshot], files: list[str]
                    ) -> tuple[str, Statement, int] | None:
    """(path of the list, the statement that appends to it, items it gained between the
    last two snapshots) for the stale hook whose list grows most, among the hooks of
    ``hook_dicts`` (the growing hook dicts of one variable); None when those hooks are
    registered again at every interval or no hook's list grows."""
    found = [g for d in hook_dicts for g in _growing_lists(d, snapshots)]
    if not found:
        return None
    (_, gained), path, attr = max(found)
    stmts = [s for s in find_statements(f"{path}.{attr}", files) if _appends(s, attr)]
    stmt = best_statement(stmts, "container")
    return (f"{path}.{attr}", stmt, gained) if stmt is not None else None


def kept_handles(hook_dict: str, snapshots: Sequence[Snapshot], files: list[str]
                 ) -> tuple[str, Statement | None, int] | None:
    """(the attribute beside ``hook_dict`` that keeps a handle per hook, the statement that
    appends to it, its items) when exactly one grows in step with the hook dict (see the
    module docstring); None otherwise."""
    walked = [s for s in snapshots if s.paths]
    if len(walked) < 2 or "." not in hook_dict:
        return None
    before, now = walked[-2].paths, walked[-1].paths
    hooks_then, hooks_now = before.get(hook_dict), now.get(hook_dict)
    if hooks_then is None or hooks_now is None or hooks_now.items is None \
            or hooks_then.items is None or hooks_now.items <= hooks_then.items:
        return None
    owner = hook_dict.rsplit(".", 1)[0] + "."
    found = []
    for path, stats in now.items():
        sibling = path.startswith(owner) and path[len(owner):].isidentifier()
        if path == hook_dict or not (sibling or stats.item_type == "RemovableHandle"):
            continue
        then = before.get(path)
        if stats.kind == "hook" or stats.items is None or then is None or then.items is None:
            continue
        if stats.items == hooks_now.items and stats.items - then.items == \
                hooks_now.items - hooks_then.items:
            found.append(path)
    if len(found) != 1:
        return None
    path = found[0]
    found = at_end(find_statements(path, files), growing_end(snapshots, path))
    stmt = best_statement(found, "container", exact=path)
    return path, stmt, now[path].items or 0
