"""Where an allocation happens: the source line, and the stack, of the code that made it.

:class:`SiteFinder` walks up from a frame to the innermost frame of the *user's* code
(not torch, the standard library, an installed package, or torchmem itself), or with
``all_files=True`` to the innermost frame that is not torchmem's (nor torch's dispatch
plumbing: ``torch._disable_dynamo`` wrappers, ``_python_dispatch``), and names it as a
:data:`Site` ``(file, line, function)``. Sites are interned: the same line gives the same
tuple object, so they are cheap dictionary keys.

Cost: one dictionary lookup per frame walked (the decision is cached per code object),
plus one per site; a full :meth:`SiteFinder.stack` walks every frame (about 0.1 us each).

Example:
    >>> import sys
    >>> finder = SiteFinder(lambda filename: True)
    >>> finder.site(sys._getframe())[1] > 0
    True
"""

from __future__ import annotations

import os
import site as _site
import sys
import sysconfig
from types import CodeType, FrameType
from typing import Callable

__all__ = ["Site", "Frame", "SiteFinder", "library_dirs", "is_user_file", "NOWHERE"]

#: ``(file, line, function)`` of a line of code.
Site = tuple[str, int, str]
#: ``(file, line, function, user)`` of one frame of a stack.
Frame = tuple[str, int, str, bool]

#: the site of an allocation made with no Python frame on the stack (a C++ thread)
NOWHERE: Site = ("<no Python frame>", 0, "")

_SKIP, _LIBRARY, _USER = 0, 1, 2
_OWN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "")
#: torch's own plumbing between an op call and a dispatch mode (the decorator frames
#: of ``torch._disable_dynamo``, the mode's dispatch): never the line that allocated
_PLUMBING = tuple(os.path.join(*parts) for parts in (
    ("torch", "_dynamo", "eval_frame.py"), ("torch", "_compile.py"),
    ("torch", "utils", "_python_dispatch.py"), ("torch", "_ops.py")))


def library_dirs() -> tuple[str, ...]:
    """Folders whose files are not the user's code: torch, torchmem, the standard
    library and the installed packages (site-packages, user site)."""
    dirs: set[str] = {os.path.dirname(_OWN.rstrip(os.sep))}
    try:
        import torch

        dirs.add(os.path.dirname(torch.__file__))
    except ImportError:  # pragma: no cover - torchmem's collectors need torch
        pass
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            dirs.add(path)
    try:
        dirs.update(_site.getsitepackages())
    except AttributeError:  # pragma: no cover - virtualenv's old site module
        pass
    user = getattr(_site, "USER_SITE", None)
    if user:
        dirs.add(user)
    prefixes = {os.path.join(d, "") for d in dirs}
    prefixes.update(os.path.join(os.path.realpath(d), "") for d in dirs)
    return tuple(sorted(prefixes))


_LIBRARY_DIRS: tuple[str, ...] | None = None


def is_user_file(filename: str) -> bool:
    """True when ``filename`` is the user's code (see :func:`library_dirs`); code typed
    at a prompt or given as a string (``<stdin>``, ``<string>``, ``<ipython-input-..>``)
    is the user's too, frozen modules (``<frozen ...>``) are not."""
    global _LIBRARY_DIRS
    if _LIBRARY_DIRS is None:
        _LIBRARY_DIRS = library_dirs()
    if filename.startswith("<"):
        return not filename.startswith(("<frozen", "<built-in"))
    return not filename.startswith(_LIBRARY_DIRS)


class SiteFinder:
    """Names the line of code an allocation belongs to.

    Args:
        is_user: decides whether a file name is the user's code.
        all_files: attribute to the innermost frame of any file (library code included),
            torchmem's own frames excepted.
        launched: the code runs under a torchmem runner (``torchmem lines script.py``):
            a stack ends at the first torchmem frame below a frame of the user's code
            (what is further down is the launcher, not the script).
    """

    def __init__(self, is_user: Callable[[str], bool] = is_user_file,
                 all_files: bool = False, launched: bool = False) -> None:
        self._is_user = is_user
        self.all_files = all_files
        self.launched = launched
        self._kinds: dict[CodeType, int] = {}
        self._sites: dict[tuple[CodeType, int], Site] = {}

    def _kind(self, code: CodeType) -> int:
        kind = self._kinds.get(code)
        if kind is None:
            name = code.co_filename
            if name.startswith(_OWN) or name.endswith(_PLUMBING):
                kind = _SKIP
            elif self._is_user(name):
                kind = _USER
            else:
                kind = _LIBRARY
            self._kinds[code] = kind
        return kind

    def frame(self, frame: FrameType | None) -> FrameType | None:
        """The frame an allocation made under ``frame`` is attributed to (or None)."""
        wanted = _LIBRARY if self.all_files else _USER
        kinds = self._kinds
        while frame is not None:
            code = frame.f_code
            kind = kinds.get(code)
            if kind is None:
                kind = self._kind(code)
            if kind >= wanted:
                return frame
            frame = frame.f_back
        return None

    def site(self, frame: FrameType | None) -> Site:
        """The :data:`Site` of the attributed frame at or above ``frame``; the innermost
        non-torchmem frame when no frame qualifies; :data:`NOWHERE` without frames."""
        wanted = _LIBRARY if self.all_files else _USER
        kinds = self._kinds
        found = frame
        while found is not None:  # self.frame(), inlined: this runs once per storage
            code = found.f_code
            kind = kinds.get(code)
            if kind is None:
                kind = self._kind(code)
            if kind >= wanted:
                break
            found = found.f_back
        if found is None:
            found = frame
            while found is not None and self._kind(found.f_code) == _SKIP:
                found = found.f_back
            if found is None:
                return NOWHERE
        code = found.f_code
        key = (code, found.f_lineno)
        site = self._sites.get(key)
        if site is None:
            site = self._sites[key] = (code.co_filename, key[1], code.co_name)
        return site

    def inner(self, frame: FrameType | None) -> tuple[CodeType, int] | None:
        """``(code, line)`` of the innermost frame at or above ``frame`` that is not
        torchmem's (the call that allocated, whoever's code it is)."""
        while frame is not None:
            code = frame.f_code
            kind = self._kinds.get(code)
            if kind is None:
                kind = self._kind(code)
            if kind != _SKIP:
                return code, frame.f_lineno
            frame = frame.f_back
        return None

    def stack(self, frame: FrameType | None, limit: int = 64) -> tuple[Frame, ...]:
        """The stack at ``frame`` (torchmem's frames left out), innermost first, at most
        ``limit`` frames; each frame says whether it is the user's code (see
        ``launched`` for where it ends)."""
        out: list[Frame] = []
        while frame is not None and len(out) < limit:
            code = frame.f_code
            kind = self._kinds.get(code)
            if kind is None:
                kind = self._kind(code)
            if kind != _SKIP:
                out.append((code.co_filename, frame.f_lineno, code.co_name, kind == _USER))
            elif self.launched and any(f[3] for f in out):
                break
            frame = frame.f_back
        return tuple(out)


def caller(depth: int = 1) -> FrameType | None:
    """``sys._getframe(depth + 1)``, or None when the stack is not that deep."""
    try:
        return sys._getframe(depth + 1)
    except ValueError:
        return None
