"""Resolve and load what the user asked to run: a script path or ``-m module``.

Loading reproduces what ``python script.py`` / ``python -m module`` would do before the
first line runs, and turns every way that can fail *before* the script starts (missing
file, directory without ``__main__.py``, syntax error, undecodable source, unknown
module) into one :class:`~torchmem.errors.InputError` / :class:`~torchmem.errors.ScriptError`
line instead of a traceback.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass, field
from types import CodeType
from typing import Any

from torchmem.errors import InputError, ScriptError

__all__ = ["Target", "LoadedTarget", "load_target"]


@dataclass
class Target:
    """What to run.

    Attributes:
        path: a script file (or a directory/zip with ``__main__.py``), like ``python path``.
        module: a module name, like ``python -m module``. Exactly one of the two is set.
        args: the script's own arguments (``sys.argv[1:]``).
    """

    path: str | None = None
    module: str | None = None
    args: list[str] = field(default_factory=list)
    #: run this file's source as the script's (same ``__file__``, ``sys.path[0]`` and
    #: tracebacks' file name): how the doctor re-runs a script with a fix applied
    source_file: str | None = None

    @property
    def display(self) -> str:
        """How the target reads in reports: ``train.py`` or ``-m pkg.train``."""
        return self.path if self.path is not None else f"-m {self.module}"


@dataclass
class LoadedTarget:
    """A target compiled and ready to execute in a fresh ``__main__``."""

    code: CodeType
    argv0: str
    filename: str
    sys_path0: str
    main_attrs: dict[str, Any]


def _compile(source: bytes, filename: str, shown: str) -> CodeType:
    try:
        return compile(source, filename, "exec", dont_inherit=True)
    except SyntaxError as err:
        where = f"{shown}:{err.lineno}" if err.lineno else shown
        if err.offset:
            where += f":{err.offset}"
        msg = err.msg or "invalid syntax"
        if "null bytes" in msg:
            raise InputError(f"{shown} is not a Python source file: it contains null bytes",
                             tip="is it a binary or a compiled file?") from None
        if "codec can't decode" in msg or "encoding" in msg.lower():
            raise InputError(
                f"cannot decode {shown}: {msg}; expected UTF-8 or a PEP 263 coding line",
                tip="save the file as UTF-8, or declare its encoding: # -*- coding: latin-1 -*-",
            ) from None
        raise InputError(f"syntax error in {where}: {msg}",
                         tip=f"run 'python {shown}' to see the same error") from None
    except (UnicodeDecodeError, LookupError) as err:
        raise InputError(f"cannot decode {shown}: {err}; expected UTF-8 or a PEP 263 coding line",
                         tip="save the file as UTF-8") from None
    except ValueError as err:  # e.g. "source code string cannot contain null bytes"
        raise InputError(f"{shown} is not a Python source file: {err}") from None


def _read_source(path: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as err:
        raise InputError(f"cannot read {path}: {err.strerror}") from None


def _load_path(path: str, source_file: str | None = None) -> LoadedTarget:
    shown = path
    if not os.path.exists(path):
        raise InputError(f"script not found: {shown}", tip="check the path; run from the script's folder")
    filename = os.path.abspath(path)
    if os.path.isdir(path):
        main = os.path.join(path, "__main__.py")
        if not os.path.isfile(main):
            raise InputError(f"{shown} is a directory without __main__.py; expected a Python script")
        filename, shown = os.path.abspath(main), os.path.join(path, "__main__.py")
        sys_path0 = os.path.abspath(path)
    else:
        sys_path0 = os.path.dirname(filename)
    try:
        with open(filename, "rb") as fh:
            source = fh.read()
    except OSError as err:
        raise InputError(f"cannot read {shown}: {err.strerror}") from None
    if source_file is not None:
        source = _read_source(source_file)
    code = _compile(source, filename, shown)
    attrs = {"__file__": filename, "__cached__": None, "__spec__": None,
             "__package__": None, "__loader__": None}
    return LoadedTarget(code, argv0=path, filename=filename, sys_path0=sys_path0, main_attrs=attrs)


def _load_module(name: str, source_file: str | None = None) -> LoadedTarget:
    if not name or name.startswith("."):
        raise ScriptError(f"invalid module name {name!r}; expected an absolute name like pkg.train")
    cwd = os.getcwd()
    added = cwd not in sys.path
    if added:
        sys.path.insert(0, cwd)
    try:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations is not None:
            spec = importlib.util.find_spec(name + ".__main__")
            if spec is None:
                raise ScriptError(f"{name} is a package and cannot be run directly; "
                                  "expected it to have a __main__ module")
    except ScriptError:
        raise
    except (ImportError, ValueError) as err:
        raise ScriptError(f"cannot find module {name!r}: {err}") from None
    finally:
        if added:
            sys.path.remove(cwd)
    if spec is None or spec.loader is None:
        raise ScriptError(f"no module named {name!r}", tip="run from the folder that contains the package")
    try:
        code = spec.loader.get_code(spec.name)  # type: ignore[attr-defined]
    except SyntaxError as err:
        raise InputError(f"syntax error in {spec.origin}:{err.lineno}: {err.msg}") from None
    except (ImportError, AttributeError, UnicodeDecodeError) as err:
        raise ScriptError(f"cannot load module {name!r}: {err}") from None
    if code is None:
        raise ScriptError(f"module {name!r} has no Python code to run")
    origin = spec.origin or name
    if source_file is not None:
        code = _compile(_read_source(source_file), origin, origin)
    attrs = {"__file__": origin, "__cached__": getattr(spec, "cached", None), "__spec__": spec,
             "__package__": spec.parent, "__loader__": spec.loader}
    return LoadedTarget(code, argv0=origin, filename=origin, sys_path0=cwd, main_attrs=attrs)


def load_target(target: Target) -> LoadedTarget:
    """Compile the target without running it.

    Raises:
        InputError: missing file, unreadable or undecodable source, syntax error.
        ScriptError: unknown module, package without ``__main__``.
    """
    if (target.path is None) == (target.module is None):
        raise ScriptError("expected exactly one of a script path or -m module")
    if target.path is not None:
        return _load_path(target.path, target.source_file)
    return _load_module(target.module or "", target.source_file)
