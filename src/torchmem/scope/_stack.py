"""Private: open and close scopes on a thread -- the engines' modes and the global hooks.

Each engine's mode is pushed when the first open scope of the thread that uses it is
entered and popped when the last one exits; the global hooks of
:mod:`torchmem.scope._hooks` are installed while the thread has any scope open.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchmem.scope._calls import CallsMode
from torchmem.scope._engine import ThreadState, _Mode, state
from torchmem.scope._hooks import install_hooks, install_spies, remove_spies, uninstall_hooks

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.scope.core import Scope

__all__ = ["push", "pop"]


def push(scope: Scope) -> ThreadState:
    """Open ``scope`` on this thread; push its engine's mode when no open scope uses it."""
    st = state()
    kind = scope._engine_kind
    mode, users = st.modes.get(kind, (None, 0))
    if mode is None:
        if kind == "dispatch":
            mode = _Mode(st)
            install_spies()
        else:
            mode = CallsMode(st)
        mode.__enter__()
    st.modes[kind] = (mode, users + 1)
    if not st.stack:
        install_hooks()
    st.stack.append(scope)
    return st


def pop(st: ThreadState, scope: Scope) -> None:
    """Close ``scope`` (the innermost); pop its engine's mode after the last user."""
    if st.stack and st.stack[-1] is scope:
        st.stack.pop()
    elif scope in st.stack:  # pragma: no cover - defensive: exits out of order
        st.stack.remove(scope)
    try:
        mode, users = st.modes.get(scope._engine_kind, (None, 0))
        if mode is not None:
            if users > 1:
                st.modes[scope._engine_kind] = (mode, users - 1)
            else:
                del st.modes[scope._engine_kind]
                try:
                    mode.__exit__(None, None, None)
                finally:
                    if scope._engine_kind == "dispatch":
                        remove_spies()
    finally:
        if not st.stack:
            st.in_step = 0
            uninstall_hooks()
