"""Where the doctor's walk starts: the user frames, their locals, user modules, owned memory.

Reading a running frame's locals must leave nothing behind (:func:`read_locals`); the
parameters, gradients, optimizer state and buffers of the script's modules and optimizers
are *owned* memory (:func:`owned_storages`), which every healthy loop holds.
"""

from __future__ import annotations

import os
import sys
import types
from typing import Any, Callable, Iterable

import torch

from torchmem.collect.graph import storage_key, storage_nbytes

__all__ = ["owned_storages", "frame_chain", "read_locals"]

_ATOMIC = (str, bytes, bytearray, int, float, complex, bool, type(None), range, slice,
           types.ModuleType, type, types.BuiltinFunctionType, types.CodeType, memoryview)

_user_modules_cache: tuple[int, Any, list[str]] = (-1, None, [])


def _user_modules(is_user: Callable[[str], bool],
                  referenced: frozenset[str] = frozenset()) -> list[str]:
    """Names of imported modules whose file is user code (cached while sys.modules is stable).

    When ``is_user`` is the method of a :class:`~torchmem.doctor.steps.UserFrames` whose
    ``caller_modules`` are set (a script run in-process: the modules imported before it
    started are its caller's, such as a test session's), those are left out unless
    ``referenced`` names them (:func:`referenced_modules` of the script's namespace)."""
    global _user_modules_cache
    n = len(sys.modules)
    # keyed by the predicate too (equal bound methods of one UserFrames compare equal)
    if _user_modules_cache[0] != n or _user_modules_cache[1] != is_user:
        import site
        import sysconfig

        libs = {sysconfig.get_paths().get(k) for k in ("purelib", "platlib")}
        try:
            libs.update(site.getsitepackages())
        except AttributeError:  # virtualenvs of old
            pass
        prefixes = tuple(os.path.join(os.path.realpath(d), "") for d in libs if d)
        names = []
        for name, mod in list(sys.modules.items()):
            file = getattr(mod, "__file__", None)
            if (isinstance(file, str) and name != "__main__" and is_user(file)
                    and not os.path.realpath(file).startswith(prefixes)):
                names.append(name)
        _user_modules_cache = (n, is_user, names)
    callers = getattr(getattr(is_user, "__self__", None), "caller_modules", None)
    if not callers:
        return _user_modules_cache[2]
    return [name for name in _user_modules_cache[2] if name not in callers
            or name in referenced or name.rpartition(".")[0] in referenced]


def referenced_modules(namespace: dict[str, Any] | None) -> frozenset[str]:
    """Names of the modules a namespace refers to: modules bound in it (``import helpers``;
    ``import pkg.sub`` binds ``pkg``, whose direct submodules count as referred to) and the
    modules of the functions and classes bound in it (``from helpers import f``)."""
    if not namespace:
        return frozenset()
    out = set()
    for value in list(namespace.values()):
        if isinstance(value, types.ModuleType):
            out.add(value.__name__)
        elif isinstance(value, (types.FunctionType, type)):
            module = getattr(value, "__module__", None)
            if isinstance(module, str):
                out.add(module)
    return frozenset(out)


_OWNERS = (torch.nn.Module, torch.optim.Optimizer)


def owning_objects(values: Iterable[Any]) -> list[Any]:
    """The modules and optimizers whose memory the script owns: those among ``values``
    (the names of its frames and modules), among their attributes one level deep
    (``trainer.optimizer``), and in the closure cells of functions among them (the model
    and optimizer a step function trains). An optimizer kept deeper (in a dict of models,
    a list of trials) is not one of them: what it holds counts for the path that keeps
    it."""
    out = []
    for v in values:
        if isinstance(v, _OWNERS):
            out.append(v)
            continue
        inner: list[Any] = []
        if isinstance(v, types.FunctionType):
            for cell in v.__closure__ or ():
                try:
                    inner.append(cell.cell_contents)
                except ValueError:  # an empty cell
                    continue
        elif hasattr(v, "__dict__"):
            try:
                inner = list(vars(v).values())
            except TypeError:
                inner = []
        out.extend(a for a in inner if isinstance(a, _OWNERS))
    return out


def owned_storages(objs: Iterable[Any]) -> dict[int, int]:
    """Storage keys -> bytes of what modules and optimizers among ``objs`` own."""
    owned: dict[int, int] = {}

    def add(t: Any) -> None:
        if isinstance(t, torch.Tensor):
            key = storage_key(t)
            if key is not None:
                owned[key] = storage_nbytes(t)
            g = t.grad if t.is_leaf else None
            if g is not None:
                gk = storage_key(g)
                if gk is not None:
                    owned[gk] = storage_nbytes(g)

    for obj in objs:
        if isinstance(obj, torch.nn.Module):
            for p in obj.parameters():
                add(p)
            for b in obj.buffers():
                if b.grad_fn is None:
                    add(b)
        elif isinstance(obj, torch.optim.Optimizer):
            for group in obj.param_groups:
                for p in group.get("params", ()):
                    add(p)
            for state in obj.state.values():
                if isinstance(state, dict):
                    for v in state.values():
                        add(v)
    return owned


def frame_chain(frame: types.FrameType | None, is_user: Callable[[str], bool],
                outermost: Callable[[types.FrameType], bool] | None = None) -> list[types.FrameType]:
    """The user frames from ``frame`` outwards (innermost first), up to and including
    the frame for which ``outermost`` is true when it is given."""
    out = []
    while frame is not None:
        if is_user(frame.f_code.co_filename):
            out.append(frame)
        if outermost is not None and outermost(frame):
            break
        frame = frame.f_back
    return out


_CO_OPTIMIZED = 0x0001


def read_locals(frame: types.FrameType) -> dict[str, Any]:
    """A copy of a frame's locals that leaves nothing behind on the frame.

    For a function frame on Python < 3.13, reading ``f_locals`` stores a snapshot dict
    on the frame that keeps its values alive until the next read; it is emptied again
    here (every later write-back is preceded by a fresh read, so this is safe). Module,
    class-body and ``exec`` frames have a real namespace, which is only copied.
    """
    namespace = frame.f_locals
    values = dict(namespace)
    if (sys.version_info < (3, 13) and frame.f_code.co_flags & _CO_OPTIMIZED
            and namespace is not frame.f_globals):
        namespace.clear()
    return values


def _frame_locals(frame: types.FrameType) -> dict[str, Any]:
    if frame.f_code.co_name == "<module>":
        return dict(frame.f_globals)
    return read_locals(frame)


def _root_items(namespace: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(k, v) for k, v in namespace.items()
            if not (k.startswith("__") and k.endswith("__")) and not isinstance(v, _ATOMIC)]
