"""Count calls to library functions that keep what they build in torch's C++ state.

``torch.jit.trace`` compiles the traced module into TorchScript; what it compiles is kept
by TorchScript, not by a variable of the script. Called once it is a cost, called every
step it is memory that grows with no Python path to it. The doctor counts these calls per
step (and remembers the script's line that made the first one) so that growth nothing
in Python explains can be tied to the call seen each step.

The wrappers forward every argument unchanged and return the original's result; they
are installed while the script runs and removed after, however it ended.

Cost: one Python call per wrapped call (these functions take milliseconds or more).
"""

from __future__ import annotations

import linecache
import sys
from typing import Any, Callable

__all__ = ["NativeCalls", "WATCHED"]

#: (module, attribute, name shown): calls whose result torch keeps in C++ state.
#: ``torch.jit.script`` is not wrapped: it resolves names through its caller's frame.
WATCHED: tuple[tuple[str, str, str], ...] = (
    ("torch.jit", "trace", "torch.jit.trace"),
    ("torch.jit", "trace_module", "torch.jit.trace_module"),
)


class NativeCalls:
    """Wraps the :data:`WATCHED` functions while active and counts their calls.

    Args:
        is_user: decides whether a file name is user code (for the call site).

    Attributes:
        pending: names called since the last :meth:`take`.
        sites: name -> (file, line, code) of the first call from user code.
    """

    def __init__(self, is_user: Callable[[str], bool]) -> None:
        self.is_user = is_user
        self.pending: set[str] = set()
        self.sites: dict[str, tuple[str, int, str]] = {}
        self._undo: list[Callable[[], None]] = []
        self._active = 0  # a watched call running: the calls it makes are its own

    def install(self) -> None:
        """Wrap the watched functions (idempotent)."""
        if self._undo:
            return
        for modname, attr, shown in WATCHED:
            owner = sys.modules.get(modname)
            original = getattr(owner, attr, None) if owner is not None else None
            if original is None:
                continue
            setattr(owner, attr, self._wrapper(original, shown))
            self._undo.append(lambda o=owner, a=attr, f=original: setattr(o, a, f))

    def remove(self) -> None:
        """Put the original functions back."""
        while self._undo:
            self._undo.pop()()

    def take(self) -> set[str]:
        """The names called since the previous call (and forget them)."""
        names, self.pending = self.pending, set()
        return names

    def _wrapper(self, original: Callable[..., Any], shown: str) -> Callable[..., Any]:
        calls = self

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if calls._active:
                return original(*args, **kwargs)
            calls._note(shown, sys._getframe(1))
            calls._active += 1
            try:
                return original(*args, **kwargs)
            finally:
                calls._active -= 1

        wrapper.__wrapped__ = original  # type: ignore[attr-defined]
        for name in ("__name__", "__qualname__", "__doc__", "__module__"):
            try:
                setattr(wrapper, name, getattr(original, name))
            except (AttributeError, TypeError):
                pass
        return wrapper

    def _note(self, shown: str, frame: Any) -> None:
        try:
            self.pending.add(shown)
            if shown not in self.sites:
                while frame is not None and not self.is_user(frame.f_code.co_filename):
                    frame = frame.f_back
                if frame is not None:
                    file, line = frame.f_code.co_filename, frame.f_lineno
                    self.sites[shown] = (file, line, linecache.getline(file, line).strip())
        except Exception:  # noqa: BLE001 - counting must never break the call
            pass
