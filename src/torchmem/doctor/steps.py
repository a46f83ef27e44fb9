"""Find the training steps of a script that knows nothing about torchmem.

A *step* ends when ``optimizer.step()`` returns (a global optimizer post-hook). Scripts
without an optimizer (manual SGD, pure evaluation) fall back to ``backward()`` calls,
and scripts without backward fall back to calls of top-level ``nn.Module`` forwards.
Everything is installed in :meth:`StepHooks.__enter__` and removed in ``__exit__``.

Cost: one Python call per ``optimizer.step()`` and per ``backward()``. The forward
fallback installs global module hooks, which make every module call take torch's slow
path; they are removed as soon as a backward or optimizer step is seen.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from types import FrameType
from typing import Any, Callable

import torch

__all__ = ["StepHooks", "UserFrames"]

_SOURCES = ("optimizer", "backward", "forward")


def _tracing() -> bool:
    """True while ``torch.jit.trace`` records a forward."""
    return torch._C._get_tracing_state() is not None


class UserFrames:
    """Decides which frames are the user's code (not torch, torchmem or the stdlib)."""

    def __init__(self, extra_library_dirs: tuple[str, ...] = ()) -> None:
        dirs = {os.path.dirname(torch.__file__), os.path.dirname(os.path.dirname(__file__))}
        for key in ("stdlib", "platstdlib"):
            path = sysconfig.get_paths().get(key)
            if path:
                dirs.add(path)
        dirs.update(extra_library_dirs)
        self._prefixes = tuple(os.path.join(os.path.realpath(d), "") for d in dirs)
        self._prefixes += tuple(os.path.join(d, "") for d in dirs)
        self._cache: dict[str, bool] = {}

    def is_user_file(self, filename: str) -> bool:
        """True when ``filename`` belongs to the user's code."""
        known = self._cache.get(filename)
        if known is None:
            known = not (filename.startswith("<") or filename.startswith(self._prefixes))
            self._cache[filename] = known
        return known

    def innermost(self, frame: FrameType | None) -> FrameType | None:
        """The first user frame at or above ``frame``."""
        while frame is not None and not self.is_user_file(frame.f_code.co_filename):
            frame = frame.f_back
        return frame


class StepHooks:
    """Installs the step and event hooks and reports them to two callbacks.

    Args:
        on_step: ``on_step(source, frame)`` at each step boundary of the active source.
        on_event: ``on_event(name, info)`` for ``backward``, ``zero_grad``,
            ``empty_cache`` and ``step_source`` (the source changed: probes reset).
        frames: the user-frame filter.
    """

    def __init__(self, on_step: Callable[[str, FrameType | None], None],
                 on_event: Callable[[str, dict[str, Any]], None], frames: UserFrames) -> None:
        self._on_step = on_step
        self._on_event = on_event
        self._frames = frames
        self.source = "none"
        self._undo: list[Callable[[], None]] = []
        self._depth = 0
        self._forward_handles: list[Any] = []

    # -- source switching -------------------------------------------------------
    def _promote(self, source: str) -> bool:
        """Make ``source`` the active one if it ranks higher; True if it is active."""
        if self.source == source:
            return True
        if self.source != "none" and _SOURCES.index(source) > _SOURCES.index(self.source):
            return False
        previous, self.source = self.source, source
        if source != "forward":
            self._remove_forward_hooks()
        self._on_event("step_source", {"source": source, "previous": previous})
        return True

    def _user_frame(self) -> FrameType | None:
        return self._frames.innermost(sys._getframe(2))

    # -- hooks --------------------------------------------------------------------
    def _optimizer_post(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if self._promote("optimizer"):
            self._on_step("optimizer", self._user_frame())

    def _wrap_backward(self) -> None:
        original = torch.autograd.backward
        hooks = self

        def backward(tensors: Any, grad_tensors: Any = None, retain_graph: Any = None,
                     create_graph: bool = False, *args: Any, **kwargs: Any) -> Any:
            frame = hooks._frames.innermost(sys._getframe(1))
            hooks._on_event("backward", {"frame": frame,
                                         "retain_graph": bool(retain_graph or create_graph),
                                         "create_graph": bool(create_graph)})
            result = original(tensors, grad_tensors, retain_graph, create_graph, *args, **kwargs)
            if hooks.source in ("none", "forward", "backward") and hooks._promote("backward"):
                hooks._on_step("backward", frame)
            return result

        backward.__wrapped__ = original  # type: ignore[attr-defined]
        torch.autograd.backward = backward  # type: ignore[assignment]
        self._undo.append(lambda: setattr(torch.autograd, "backward", original))

    def _wrap_event(self, owner: Any, attr: str, event: str) -> None:
        original = getattr(owner, attr, None)
        if original is None:
            return
        hooks = self

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            hooks._on_event(event, {"frame": hooks._frames.innermost(sys._getframe(1)),
                                    "owner": type(args[0]).__name__ if args else None})
            return original(*args, **kwargs)

        wrapper.__wrapped__ = original  # type: ignore[attr-defined]
        wrapper.__name__ = getattr(original, "__name__", attr)
        wrapper.__doc__ = getattr(original, "__doc__", None)
        setattr(owner, attr, wrapper)
        self._undo.append(lambda: setattr(owner, attr, original))

    def _forward_pre(self, module: Any, args: Any) -> None:
        self._depth += 1

    def _forward_post(self, module: Any, args: Any, output: Any) -> None:
        self._depth -= 1
        if self._depth <= 0 and _tracing():
            # torch.jit.trace runs the forward to record it (and again to check the
            # record): not a step of the script, and analysing the heap in the middle
            # of a trace changes the recorded graph (TracingCheckError).
            self._depth = 0
            return
        if self._depth <= 0 and self._promote("forward"):
            self._depth = 0
            self._on_step("forward", self._frames.innermost(sys._getframe(1)))

    def _remove_forward_hooks(self) -> None:
        for handle in self._forward_handles:
            handle.remove()
        self._forward_handles.clear()

    def __enter__(self) -> "StepHooks":
        try:
            from torch.optim.optimizer import register_optimizer_step_post_hook
            handle = register_optimizer_step_post_hook(self._optimizer_post)
            self._undo.append(handle.remove)
            self._wrap_backward()
            self._wrap_event(torch.optim.Optimizer, "zero_grad", "zero_grad")
            self._wrap_event(torch.nn.Module, "zero_grad", "zero_grad")
            self._wrap_event(torch.cuda, "empty_cache", "empty_cache")
            from torch.nn.modules.module import (register_module_forward_hook,
                                                 register_module_forward_pre_hook)
            self._forward_handles = [register_module_forward_pre_hook(self._forward_pre),
                                     register_module_forward_hook(self._forward_post,
                                                                  always_call=True)]
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._remove_forward_hooks()
        while self._undo:
            self._undo.pop()()
