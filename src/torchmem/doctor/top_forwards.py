"""Watch the forwards of a training script's top-level models at the cost of one call each.

Before the first ``backward()`` or optimizer step, the step hooks see every module call
(global module hooks, :mod:`torchmem.doctor.steps`) and tell :class:`TopForwards` the
classes of the modules called at the top level (the model, the loss module, a GAN's two
networks). When the training steps start, the global hooks go (they put every module call
on torch's slow path) and each of those classes gets a ``__call__`` of its own that counts
its calls at the top level and calls ``nn.Module.__call__`` as before: sub-modules of other
classes keep torch's fast path, and the script's modules are not touched (no hook in
their dictionaries: ``torch.save(model)``, ``copy.deepcopy`` and ``torch.jit.script``
see them as they were). The phases (:mod:`torchmem.doctor.phases`) count these forwards
between training steps to find evaluation passes that ``model.eval()`` does not announce.

Cost: per call of a watched class, one Python call, two counter updates and, for a
top-level call, one more call into the phase tracker (a few comparisons). Nothing while
``torch.compile`` traces (``torch.compiler.is_compiling()``), while ``torch.jit.trace``
records, while a backward runs (activation checkpointing calls modules again there), or
in another thread.

Known limitations:
    * Only classes whose calls go through ``nn.Module.__call__`` are watched (not
      ``torch.compile``'s wrapper nor TorchScript modules), at most :data:`MAX_CLASSES`
      of them, learned before the first training step: a model first called after it
      (an EMA copy) is counted only when its class is one of them.
    * Every instance of a watched class is counted when called at the top level, and a
      library class (``nn.Sequential``) pays the call in other models too.
"""

from __future__ import annotations

import sys
import threading
from types import FrameType
from typing import Any, Callable

import torch

__all__ = ["TopForwards", "MAX_CLASSES"]

#: classes watched at most (the first seen at the top level)
MAX_CLASSES = 8


def _watchable(cls: type) -> bool:
    module = getattr(cls, "__module__", "") or ""
    return (cls is not torch.nn.Module and cls.__call__ is torch.nn.Module.__call__
            and not module.startswith(("torch.jit", "torch._dynamo", "torch.fx")))


class TopForwards:
    """Learns the top-level module classes, then counts their top-level calls.

    Args:
        report: ``report(caller_frame, output)`` after each top-level call returned.

    Attributes:
        classes: the classes learned (kept only while the run lasts).
        paused: while positive, calls are not reported (a backward is running).
        error: the first error of the report (None); no call is reported after it.
    """

    def __init__(self, report: Callable[[FrameType | None, Any], None]) -> None:
        self._report = report
        self.classes: list[type] = []
        self.paused = 0
        self.error: str | None = None
        self._depth = 0
        self._installed: list[type] = []
        self._thread = threading.get_ident()

    def learn(self, module: Any) -> None:
        """A module was called at the top level before the training steps started."""
        cls = type(module)
        if len(self.classes) < MAX_CLASSES and cls not in self.classes and _watchable(cls):
            self.classes.append(cls)

    def install(self) -> None:
        """Give each learned class the counting ``__call__`` (once)."""
        if self._installed or not self.classes:
            return
        watcher = self
        is_compiling = torch.compiler.is_compiling
        base = torch.nn.Module
        thread = self._thread

        def __call__(module: Any, *args: Any, **kwargs: Any) -> Any:
            if is_compiling() or threading.get_ident() != thread:
                return base.__call__(module, *args, **kwargs)
            watcher._depth += 1
            try:
                output = base.__call__(module, *args, **kwargs)  # looked up now: fx patches it
            finally:
                watcher._depth -= 1
            if not watcher._depth and not watcher.paused and torch._C._get_tracing_state() is None:
                try:
                    watcher._report(sys._getframe(1), output)
                except Exception as err:  # noqa: BLE001 - never break the script's forward
                    watcher.error = f"{type(err).__name__}: {err}"
                    watcher.paused += 1  # for good: the run's notes say so
            return output

        for cls in self.classes:
            if "__call__" not in cls.__dict__ and _watchable(cls):
                try:
                    cls.__call__ = __call__  # type: ignore[method-assign]
                except (TypeError, AttributeError):  # a metaclass that forbids it
                    continue
                self._installed.append(cls)

    def uninstall(self) -> None:
        """Give the classes back their ``__call__`` (inherited from ``nn.Module`` again)."""
        while self._installed:
            cls = self._installed.pop()
            if "__call__" in cls.__dict__:
                delattr(cls, "__call__")
        self._depth = 0
