"""Run a user's script as ``python script.py`` would, with memory probes at each step.

The runner is the engine under ``torchmem run`` and ``torchmem doctor``. It executes the
script in a fresh ``__main__`` module with the script's own ``sys.argv`` and
``sys.path[0]``, finds training steps (:mod:`torchmem.doctor.steps`), takes a cheap
reading at every step boundary, samples a timeline with a background
:class:`~torchmem.collect.monitor.Monitor`, and calls :class:`Probe` objects that do the
deeper analysis. Whatever way the script ends (return, exception, ``sys.exit``,
Ctrl-C, out of memory, ``--steps`` reached), the result is a :class:`RunResult` with
the script's exit code.

Cost per step: one ``mallinfo2`` call (~10-70 us, grows with the number of free heap
chunks), one RSS read (~5 us), and for each initialised CUDA device
``memory_allocated``/``memory_reserved`` (no device synchronisation).

A stop (``--steps`` reached, or SIGTERM with ``handle_sigterm``) sticks: a bare
``except:`` around the step does not make the script carry on (see
:mod:`torchmem.doctor._stop`). Per-step records are bounded for long runs (see
:mod:`torchmem.doctor._steplog`).

Evaluation passes (``model.eval()`` ... ``model.train()``, or more top-level forwards
than a training step has with no backward) are tracked as phases of their own
(:mod:`torchmem.doctor.phases`): probes get ``pass_step``, ``pass_end`` and ``pass_drop``
events, and the result lists each phase with its growth verdict.

Known limitations:
    * Scripts that call ``os._exit`` end the process before any report is written.
    * Steps are found through ``optimizer.step()``, ``backward()``, top-level module
      forwards, or the iterations of the user's innermost loop that runs tensor work
      (not found under a debugger or coverage tracer); a script with none of those has
      no steps (the run summary still shows the timeline).
    * Threads started by the script are not waited for beyond what the script does.
"""

from __future__ import annotations

import datetime as _dt
import sys
import time
import types
from types import FrameType
from typing import Any, Callable, Sequence

import torch

from torchmem.doctor._ending import (
    Outcome,
    exit_code,
    flush,
    innermost_user_frame,
    print_exit_message,
    print_script_exception,
    trim_traceback,
)
from torchmem.doctor._steplog import StepLog
from torchmem.doctor._summary import cuda_devices
from torchmem.doctor._stop import SIGTERM_EXIT_CODE, SigtermHandler, Stopper, StopRun, Terminated
from torchmem.doctor.sigint import SigintGuard
from torchmem.doctor.phases import PhaseTracker
from torchmem.doctor.run_result import RunResult, build_result
from torchmem.doctor.steps import StepHooks, UserFrames
from torchmem.doctor.target import Target, load_target
from torchmem.errors import is_oom
from torchmem.model.capture import StepRecord

__all__ = ["Target", "Probe", "Outcome", "Run", "RunResult", "build_result", "run_script",
           "StopRun", "Terminated", "SIGTERM_EXIT_CODE"]

#: Namespaces of scripts run with ``keep_namespace=True``: alive until the process
#: exits, as ``python script.py`` keeps its ``__main__`` (atexit handlers, threads).
_KEPT_NAMESPACES: list[types.ModuleType] = []


class Probe:
    """Base class for analyses that run alongside a script. Override what you need."""

    def on_start(self, run: "Run") -> None:
        """Called before the script's first line runs."""

    def on_step(self, run: "Run", step: int, frame: FrameType | None) -> None:
        """Called at each step boundary in the script's thread (``run.steps[-1]`` is fresh)."""

    def on_event(self, run: "Run", name: str, info: dict[str, Any]) -> None:
        """Called for ``backward``, ``zero_grad``, ``empty_cache``, ``step_source``, ``mode``
        (``model.train()``/``eval()``), ``pass_step``, ``pass_end``, ``pass_drop``."""

    def on_finish(self, run: "Run", outcome: "Outcome") -> None:
        """Called once after the script ended, however it ended."""


class Run:
    """The live state of one run, handed to probes.

    Attributes:
        target: what runs.
        argv: the script's ``sys.argv``.
        script_path: absolute path of the code that runs.
        main_globals: the script's ``__main__`` namespace (live while it runs).
        steps: one :class:`StepRecord` per step of the active step source (for runs
            longer than a few thousand steps, a bounded sample: see ``step_count``).
        step_count: the number of steps of the active step source.
        step_source: ``optimizer``, ``backward``, ``forward`` or ``none``.
        devices: devices seen holding memory.
        started: ``time.time()`` at start.
        frames: the user-frame filter (``frames.is_user_file(filename)``).
        outermost: when set, ``outermost(frame)`` is true for the last frame whose
            variables the analysis reads (frames beyond it are the caller's, not the
            code under analysis); None reads every user frame on the stack.
    """

    def __init__(self, target: Target, argv: list[str], script_path: str,
                 main_globals: dict[str, Any], probes: Sequence[Probe],
                 max_steps: int | None, frames: UserFrames | None = None) -> None:
        self.target = target
        self.argv = argv
        self.script_path = script_path
        self.main_globals = main_globals
        self.probes = list(probes)
        self.max_steps = max_steps
        self.step_log = StepLog()
        self.steps: list[StepRecord] = self.step_log.records
        self.step_source = "none"
        self.devices: set[str] = {"cpu"}
        self.started = time.time()
        self._t0 = time.perf_counter()
        self.frames = frames if frames is not None else UserFrames()
        self.outermost: Callable[[FrameType], bool] | None = None
        self.monitors: dict[str, Any] = {}
        self.timelines: list[Any] = []
        self.monitor_interval: float | None = None
        self.probe_errors: list[str] = []
        self._stop_requested = False
        self.stopper = Stopper(self.frames.is_user_file)
        from torchmem.collect import cpu as _cpu  # cheap readers, no CUDA init
        self._heap = _cpu.heap_bytes
        self._rss = _cpu.rss_bytes
        self.phases = PhaseTracker(lambda: self.step_source, lambda: self.step_log.count,
                                   self._heap, lambda n, i: self._dispatch("on_event", n, i))

    def add_monitor(self, device: str) -> None:
        """Start sampling ``device`` in the background (no-op without an interval)."""
        if self.monitor_interval is None or device in self.monitors:
            return
        from torchmem.collect.monitor import Monitor

        monitor = Monitor(interval=self.monitor_interval, device=device)
        self.monitors[device] = monitor
        monitor.start()

    def stop_monitors(self) -> None:
        """Stop every sampler and keep their timelines."""
        for monitor in self.monitors.values():
            if monitor.running:
                self.timelines.append(monitor.stop())
        self.monitors.clear()

    @property
    def step_count(self) -> int:
        """Steps of the active source so far (``len(steps)`` until records are thinned)."""
        return self.step_log.count

    def request_stop(self) -> None:
        """Ask the run to stop at the next step boundary (like ``--steps``)."""
        self._stop_requested = True

    def reading(self) -> StepRecord:
        """Take the cheap per-step reading (no device synchronisation)."""
        used: dict[str, int] = {}
        reserved: dict[str, int] = {}
        heap = self._heap()
        used["cpu"] = heap if heap is not None else self._rss()
        for index in cuda_devices():
            name = f"cuda:{index}"
            self.devices.add(name)
            used[name] = int(torch.cuda.memory_allocated(index))
            reserved[name] = int(torch.cuda.memory_reserved(index))
        return StepRecord(step=self.step_log.count + 1, time=time.perf_counter() - self._t0,
                          used=used, reserved=reserved, rss=self._rss())

    # -- callbacks from StepHooks ------------------------------------------------
    def _dispatch(self, method: str, *args: Any) -> None:
        for probe in self.probes:
            try:
                getattr(probe, method)(self, *args)
            except StopRun:
                raise
            except Exception as err:  # noqa: BLE001 - a probe must never break the script
                self.probe_errors.append(f"{type(probe).__name__}.{method}: {type(err).__name__}: {err}")

    def _on_step(self, source: str, frame: FrameType | None) -> None:
        if source in ("optimizer", "backward"):
            self.phases.on_train_step()
        record = self.reading()
        self.step_log.add(record)
        for device in record.used:
            if device not in self.monitors and self.monitor_interval is not None:
                self.add_monitor(device)
        for monitor in self.monitors.values():
            monitor.step(record.step, sample=False)
        self._dispatch("on_step", record.step, frame)
        if self.stopper.requested or self._stop_requested or (
                self.max_steps is not None and record.step >= self.max_steps):
            # raised again at every boundary after the first: a bare except swallowed it
            self.stopper.stop(StopRun, f"stopped after {record.step} steps", sys._getframe())

    def _on_event(self, name: str, info: dict[str, Any]) -> None:
        if name == "step_source":
            self.step_source = info["source"]
            self.step_log.clear()
        self.phases.on_event(name, info)
        self._dispatch("on_event", name, info)


def _trim_traceback(exc: BaseException) -> types.TracebackType | None:
    """The traceback of ``exc`` without torchmem's own frames (kept for callers)."""
    return trim_traceback(exc.__traceback__)


def _restore_path(saved: list[str], path0: str | None) -> None:
    """Undo the script's ``sys.path[0]`` and give back entries it removed (``sys.path``
    cleared), keeping the ones it added: torchmem still has imports to do."""
    if not isinstance(sys.path, list):
        sys.path = list(saved)
        return
    if path0 is not None:
        if sys.path:
            sys.path[0] = path0
        else:
            sys.path.append(path0)
    present = set(sys.path)
    sys.path.extend(p for p in saved if p not in present)


def _ending(exc: BaseException, run: Run) -> Outcome:
    """The :class:`Outcome` for an exception that ended the script."""
    if isinstance(exc, Terminated):
        return Outcome("terminated", SIGTERM_EXIT_CODE, exc)
    if isinstance(exc, StopRun):
        return Outcome("max_steps", 0, exc)
    if isinstance(exc, SystemExit):
        print_exit_message(exc)
        return Outcome("exit", exit_code(exc), exc)
    frame = innermost_user_frame(exc.__traceback__, run.frames)
    if isinstance(exc, KeyboardInterrupt):
        return Outcome("interrupt", 130, exc, frame)
    return Outcome("oom" if is_oom(exc) else "exception", 1, exc, frame)


def run_script(target: Target, probes: Sequence[Probe] = (), *, max_steps: int | None = None,
               monitor_interval: float | None = 0.05, keep_namespace: bool = False,
               handle_sigterm: bool = False) -> RunResult:
    """Run ``target`` to completion under the step hooks and probes.

    Args:
        target: the script path or module and its arguments.
        probes: analyses called at start, each step, each event and the end.
        max_steps: stop the script cleanly after this many steps (outcome ``max_steps``).
        monitor_interval: seconds between background samples; ``None`` disables the Monitor.
        keep_namespace: keep the script's ``__main__`` module alive until the process
            exits, as ``python script.py`` does, so its atexit handlers and still-running
            threads find their globals. ``sys.modules['__main__']`` is given back to
            the caller's module either way.
            The CLI sets it. By default the namespace is cleared when the script returns,
            so its tensors die here (what a library caller running many scripts wants).
        handle_sigterm: while the script runs, turn SIGTERM into a clean stop (outcome
            ``terminated``, exit code 143) so that the report is still written. Only in
            the main thread, and only when SIGTERM has its default handler.

    Returns:
        A :class:`RunResult`. Exceptions raised *by the script* are printed (as Python
        would) and reflected in ``outcome``/``exit_code``, never re-raised.

    Raises:
        InputError, ScriptError: the script could not be started (missing, syntax error...).
    """
    callers = frozenset(name for name in sys.modules if name != "__main__")
    loaded = load_target(target)  # (a module target's packages are the script's: after)
    argv = [loaded.argv0, *target.args]
    main = types.ModuleType("__main__")
    main.__dict__.update(loaded.main_attrs)
    main.__dict__["__builtins__"] = __builtins__
    run = Run(target, argv, loaded.filename, main.__dict__, probes, max_steps)
    run.frames.caller_modules = callers

    saved_argv, saved_path = sys.argv, list(sys.path)
    saved_path0 = sys.path[0] if sys.path else None
    saved_main = sys.modules.get("__main__")
    started_at = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    outcome = Outcome("ok", 0)
    if monitor_interval:
        run.monitor_interval = monitor_interval
        run.add_monitor("cpu")
    sigterm = SigtermHandler(run.stopper)
    sigint = SigintGuard(run.frames.is_user_file)
    sys.argv = argv
    if sys.path:
        sys.path[0] = loaded.sys_path0
    else:
        sys.path.append(loaded.sys_path0)
    sys.modules["__main__"] = main
    try:
        with StepHooks(run._on_step, run._on_event, run.frames,
                       **run.phases.callbacks()) as hooks:
            run.phases.hooks = hooks
            run.stopper.release_trace = hooks.release_loops
            run._dispatch("on_start")
            if handle_sigterm:
                sigterm.install()
            sigint.install()
            run.stopper.start(sys._getframe())
            try:
                exec(loaded.code, main.__dict__)
                if run.stopper.requested:  # swallowed, then the script ended by itself
                    kind = Terminated if run.stopper.kind is Terminated else StopRun
                    outcome = _ending(kind(run.stopper.message), run)
            except BaseException as exc:  # noqa: BLE001 - the script's own ending
                outcome = _ending(exc, run)
            finally:
                sigint.restore()
                hooks.release_loops()
                run.stopper.finish()
                sigterm.restore()
                run.stop_monitors()
                flush(sys.stdout)
                run.phases.close("end", None)
            if hooks.top_error:
                run.probe_errors.append(f"top-level forwards: {hooks.top_error}")
            if outcome.exc is not None and outcome.kind in ("exception", "oom", "interrupt"):
                print_script_exception(outcome.exc)
            run._dispatch("on_finish", outcome)
    finally:
        sigint.restore()
        run.stopper.finish()
        sigterm.restore()
        run.stop_monitors()
        sys.argv = saved_argv
        _restore_path(saved_path, saved_path0)
        if keep_namespace:
            _KEPT_NAMESPACES.append(main)  # like Python: alive until the process exits
        # the caller's __main__ comes back: a later multiprocessing spawn (or a caller
        # that runs several scripts) must not re-import the script as its __main__
        if saved_main is not None:
            sys.modules["__main__"] = saved_main
    result = build_result(run, outcome, started_at)
    # Drop every reference to the script's frames; unless kept, its namespace too, so
    # its tensors die here.
    outcome.exc = None
    outcome.frame = None
    if not keep_namespace:
        main.__dict__.clear()
    return result
