"""Private: what a :class:`~torchmem.scope.core.Scope` does at its exit.

Every storage the scope registered is kept (``s.keep``), protected (by a reason the
report names), handed on to the enclosing scope, or freed. A storage is freed only
when :mod:`torchmem.scope._graphs` accounts for every reference to it and no graph that
outlives the scope saved it; its version counter is bumped first
(:func:`~torchmem.scope._free.invalidate`), its bytes are returned to the allocator and
its tensor objects become released tensors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import torch

from torchmem.collect.graph import storage_key
from torchmem.model.scope import ScopeReport
from torchmem.scope import _engine
from torchmem.scope._free import free_storage, invalidate, mark_released
from torchmem.scope._graphs import NO_GRAPHS, DyingSaves, LiveGraphs, can_account
from torchmem.scope._objects import captured_tensors

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.scope.core import Scope

__all__ = ["close"]


def close(closing: Scope, error: str | None) -> ScopeReport:
    """Keep, protect, hand on or free each storage the ``closing`` scope registered."""
    st = closing._state
    assert st is not None
    label = f" {closing.name!r}" if closing.name else ""
    by = f"torchmem.scope{label} entered at {closing.location}"
    kept_objs = [t for t in (r() for r in closing._kept.values()) if t is not None]
    kept_keys = set(closing._kept_keys)
    for t in kept_objs:
        k = storage_key(t)
        if k is not None:
            kept_keys.add(k)
    outer_keys: set[int] = set()
    parent = closing._parent
    while parent is not None:
        outer_keys |= parent._kept_keys
        parent = parent._parent

    protected: dict[str, int] = {}
    protected_bytes = 0
    kept = kept_bytes = 0
    hand_on: list[_engine.Entry] = []
    drop: list[_engine.Entry] = []
    candidates: list[_engine.Entry] = []
    # graphs that outlive the scope: of kept tensors, of pre-existing tensors
    # mutated inside, and of every tensor the scope does not free
    live = LiveGraphs()
    live.add(kept_objs)
    live.add(t for t in (r() for r in closing._touched.values()) if t is not None)
    del kept_objs

    def protect(e: _engine.Entry, reason: str, n: int) -> None:
        nonlocal protected_bytes
        protected[reason] = protected.get(reason, 0) + 1
        protected_bytes += n
        live.add(e.alive_tensors())

    for e in list(closing._entries.values()):
        stg = e()
        if stg is None:
            continue
        k, n = e.key, e.nbytes
        if k in kept_keys:
            kept += 1
            kept_bytes += n
            hand_on.append(e)
            live.add(e.alive_tensors())
        elif e.reason is not None:
            protect(e, e.reason, n)
            drop.append(e)
        elif k in outer_keys:
            protect(e, "outer_keep", n)
            hand_on.append(e)
        elif any(isinstance(t, torch.nn.Parameter) or (t.requires_grad and t.is_leaf)
                 for t in e.alive_tensors()):
            protect(e, "leaf_requires_grad", n)
            drop.append(e)
        else:
            candidates.append(e)

    if closing._hook_fns and candidates:  # what a backward hook will read
        captured = {storage_key(t) for fn in closing._hook_fns for t in captured_tensors(fn)}
        spared = [e for e in candidates if e.key in captured]
        for e in spared:
            protect(e, "hook_closure", e.nbytes)
            hand_on.append(e)
        candidates = [e for e in candidates if e.key not in captured]
    candidates = _spare_saved(candidates, live, protect, hand_on)
    free: list[tuple[_engine.Entry, list[torch.Tensor]]] = []
    if candidates:
        if closing._graphs_escape:  # graphs of unregistered gradients may reach them
            dying = NO_GRAPHS
        else:
            dying = DyingSaves((t for e in candidates for t in e.alive_tensors()),
                               {e.key for e in candidates}, live)
        for e in candidates:
            stg = e()
            if stg is None:
                continue
            if e.key in dying.pinned:
                protect(e, "custom_function", e.nbytes)
                hand_on.append(e)
                continue
            impls = can_account(stg, e.key, e.alive_tensors(), dying)
            if impls is None:
                protect(e, "unseen_holder", e.nbytes)
                drop.append(e)
            else:
                free.append((e, impls))
        if dying is not NO_GRAPHS:
            dying.clear()
        del dying
        if len(free) < len(candidates):  # graphs of what was spared stay alive
            still_free = {id(e) for e in
                          _spare_saved([e for e, _ in free], live, protect, hand_on)}
            free = [(e, impls) for e, impls in free if id(e) in still_free]

    released = released_bytes = released_tensors = 0
    for e, impls in free:
        stg = e()
        if stg is None:
            continue
        objs = e.alive_tensors()
        n = int(stg.nbytes())
        invalidate(impls)
        freed = free_storage(stg)
        if n and not freed:
            protect(e, "not_resizable", n)
            drop.append(e)
            continue
        released += 1
        released_bytes += freed
        released_tensors += mark_released(objs, by)
        seen = {id(t) for t in objs}  # bases and saved copies over the freed storage
        mark_released([t for t in impls if id(t) not in seen], by)
        drop.append(e)
        del objs, impls
    del free
    _hand_on(closing, hand_on, drop)
    if closing._parent is not None:
        closing._parent._touched.update(closing._touched)
        closing._parent._hook_fns.extend(closing._hook_fns)
        closing._parent._graphs_escape |= closing._graphs_escape
    closing._touched.clear()
    closing._hook_fns.clear()
    return ScopeReport(
        location=closing.location or "<unknown>",
        created=closing._created,
        created_bytes=closing._created_bytes,
        freed_inside=closing._freed_inside,
        kept=kept,
        kept_bytes=kept_bytes,
        released=released,
        released_bytes=released_bytes,
        released_tensors=released_tensors,
        protected=protected,
        protected_bytes=protected_bytes,
        peak_bytes=closing._peak,
        error=error,
    )

def _spare_saved(candidates: list[_engine.Entry], live: LiveGraphs,
                 protect: Callable[[_engine.Entry, str, int], None],
                 hand_on: list[_engine.Entry]) -> list[_engine.Entry]:
    """Protect the candidates a live graph saved for backward, until none is left;
    return the others."""
    while True:
        saved = [e for e in candidates if e.key in live.saved_keys]
        if not saved:
            return candidates
        ids = {id(e) for e in saved}
        candidates = [e for e in candidates if id(e) not in ids]
        for e in saved:
            protect(e, "saved_for_backward", e.nbytes)  # adds its graph to `live`
            hand_on.append(e)

def _hand_on(closing: Scope, hand_on: list[_engine.Entry], drop: list[_engine.Entry]) -> None:
    """Move kept entries to the parent scope; forget the others."""
    st = closing._state
    assert st is not None
    parent = closing._parent
    with st.lock:
        for e in hand_on:
            closing._entries.pop(e.key, None)
            if parent is not None:
                e.owner = parent
                parent._entries[e.key] = e
            elif st.entries.get(e.key) is e:
                del st.entries[e.key]
        for e in drop:
            closing._entries.pop(e.key, None)
            if st.entries.get(e.key) is e:
                del st.entries[e.key]
            scope = parent
            while scope is not None:  # no longer owned by the enclosing scopes
                scope._live -= e.nbytes
                scope = scope._parent
    closing._entries.clear()
