"""Find the training steps of a script that knows nothing about torchmem.

A *step* ends when ``optimizer.step()`` returns (a global optimizer post-hook). Scripts
without an optimizer (manual SGD, pure evaluation) fall back to ``backward()`` calls,
scripts without backward fall back to calls of top-level ``nn.Module`` forwards, and
scripts with none of these to the iterations of the user's innermost loop that runs
tensor work (:mod:`torchmem.doctor.loops`). Everything is installed in
:meth:`StepHooks.__enter__` and removed in ``__exit__``.

Evaluation passes: top-level ``Module.train(mode)`` calls (``model.eval()``) are reported
as ``mode`` events; while an evaluation pass is watched (:meth:`StepHooks.watch_forwards`)
each top-level forward is reported to ``on_pass_forward``. Once the training steps start,
the calls of the modules seen at the top level before them are reported to
``on_top_forward`` (:mod:`torchmem.doctor.top_forwards`), and ``after_backward`` is
called when each ``backward()`` returned.

Cost: one Python call per ``optimizer.step()`` and per ``backward()``. The forward
fallback installs global module hooks, which make every module call take torch's slow
path; they are removed as soon as a backward or optimizer step is seen. The loop fallback
traces the script's thread until any other source is seen (see its module for the cost).
The ``Module.train`` wrapper costs one Python call per call of ``train()``/``eval()``;
a top-level forward costs a few Python calls once the training steps started.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from types import FrameType
from typing import Any, Callable

import torch

__all__ = ["StepHooks", "UserFrames"]

_SOURCES = ("optimizer", "backward", "forward", "loop")


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
        #: modules imported before the script started: its caller's when it runs
        #: in-process (a test session, a notebook). Their frames still count as user
        #: code; their globals are walked only when the script refers to them (see
        #: :func:`torchmem.doctor.roots._user_modules`).
        self.caller_modules: frozenset[str] = frozenset()

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
                 on_event: Callable[[str, dict[str, Any]], None], frames: UserFrames,
                 *, loops: bool = True,
                 on_pass_forward: Callable[[FrameType | None], None] | None = None,
                 on_top_forward: Callable[[FrameType | None, Any], None] | None = None,
                 after_backward: Callable[[], None] | None = None) -> None:
        self._on_step = on_step
        self._on_event = on_event
        self._frames = frames
        self.source = "none"
        self._undo: list[Callable[[], None]] = []
        self._depth = 0
        self._forward_handles: list[Any] = []
        self._pass_handles: list[Any] = []
        self._pass_depth = 0
        self._on_pass_forward = on_pass_forward
        self._train_depth = 0
        self._after_backward = after_backward
        self._backward_depth = 0
        self._top = None
        if on_top_forward is not None:
            from torchmem.doctor.top_forwards import TopForwards

            self._top = TopForwards(lambda frame, output: on_top_forward(
                self._frames.innermost(frame), output))
        self._loops = None
        if loops:
            from torchmem.doctor.loops import LoopTracer

            self._loops = LoopTracer(frames.is_user_file, os.path.dirname(torch.__file__),
                                     self._loop_iteration)

    # -- source switching -------------------------------------------------------
    def _promote(self, source: str) -> bool:
        """Make ``source`` the active one if it ranks higher; True if it is active."""
        if self.source == source:
            return True
        if self.source != "none" and _SOURCES.index(source) > _SOURCES.index(self.source):
            return False
        previous, self.source = self.source, source
        if source not in ("forward", "loop"):
            # forwards outrank loop iterations: their hooks stay while a loop is the unit
            self._remove_forward_hooks()
            if self._top is not None:
                self._top.install()
        if source != "loop":
            self.release_loops()
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
            hooks._on_event("backward", {"frame": frame, "tensors": tensors,
                                         "retain_graph": bool(retain_graph or create_graph),
                                         "create_graph": bool(create_graph)})
            top = hooks._top
            hooks._backward_depth += 1
            if top is not None:
                top.paused += 1  # checkpointed segments run their modules again here
            try:
                result = original(tensors, grad_tensors, retain_graph, create_graph,
                                  *args, **kwargs)
            finally:
                hooks._backward_depth -= 1
                if top is not None:
                    top.paused -= 1
            if hooks._after_backward is not None and not hooks._backward_depth:
                hooks._after_backward()  # the outermost one (not a checkpoint's own)
            if hooks.source != "optimizer" and hooks._promote("backward"):
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
                                    "owner": type(args[0]).__name__ if args else None,
                                    "target": args[0] if args else None})
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
        if self._depth <= 0 and self._top is not None:
            self._top.learn(module)
        if self._depth <= 0 and self._promote("forward"):
            self._depth = 0
            self._on_step("forward", self._frames.innermost(sys._getframe(1)))

    def _remove_forward_hooks(self) -> None:
        for handle in self._forward_handles:
            handle.remove()
        self._forward_handles.clear()

    # -- the loop fallback ------------------------------------------------------------
    def release_loops(self) -> bool:
        """Stop tracing for loop steps; True if the loop tracer was installed."""
        return self._loops.uninstall() if self._loops is not None else False

    def _loop_iteration(self, frame: FrameType, changed: bool) -> None:
        if changed and self.source == "loop":
            self._on_event("step_source", {"source": "loop", "previous": "loop"})
        if self._promote("loop"):
            self._on_step("loop", frame)

    # -- evaluation passes --------------------------------------------------------------
    def _wrap_train(self) -> None:
        original = torch.nn.Module.train
        hooks = self

        def train(module: Any, mode: bool = True) -> Any:
            hooks._train_depth += 1
            try:
                result = original(module, mode)
            finally:
                hooks._train_depth -= 1
            if hooks._train_depth == 0 and isinstance(mode, bool):
                hooks._on_event("mode", {"training": mode, "module": type(module).__name__,
                                         "frame": hooks._frames.innermost(sys._getframe(1))})
            return result

        train.__wrapped__ = original  # type: ignore[attr-defined]
        train.__doc__ = original.__doc__
        torch.nn.Module.train = train  # type: ignore[method-assign, assignment]
        self._undo.append(lambda: setattr(torch.nn.Module, "train", original))

    def watch_forwards(self, on: bool) -> None:
        """Report each top-level forward to ``on_pass_forward`` (an evaluation pass), or stop."""
        if not on or self._on_pass_forward is None:
            for handle in self._pass_handles:
                handle.remove()
            self._pass_handles.clear()
            self._pass_depth = 0
            return
        if self._pass_handles:
            return
        from torch.nn.modules.module import (register_module_forward_hook,
                                             register_module_forward_pre_hook)
        self._pass_handles = [register_module_forward_pre_hook(self._pass_pre),
                              register_module_forward_hook(self._pass_post, always_call=True)]

    def _pass_pre(self, module: Any, args: Any) -> None:
        self._pass_depth += 1

    def _pass_post(self, module: Any, args: Any, output: Any) -> None:
        self._pass_depth -= 1
        if self._pass_depth <= 0:
            self._pass_depth = 0
            if not _tracing() and self._on_pass_forward is not None:
                self._on_pass_forward(self._frames.innermost(sys._getframe(1)))

    @property
    def top_error(self) -> str | None:
        """The error that stopped the watch of top-level forwards (None: none)."""
        return self._top.error if self._top is not None else None

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
            self._wrap_train()
            if self._loops is not None:
                self._loops.install()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.release_loops()
        self.watch_forwards(False)
        self._remove_forward_hooks()
        if self._top is not None:
            self._top.uninstall()
        while self._undo:
            self._undo.pop()()
