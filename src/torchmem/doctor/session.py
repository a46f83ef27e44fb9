"""The doctor inside a running program: ``DoctorSession`` and ``torchmem.leak_check``.

``torchmem doctor script.py`` runs a whole script and finds its steps by itself. A
session does the same analysis for code that is already running -- a test, a notebook,
a training-loop callback -- where the caller says where each step ends::

    with torchmem.DoctorSession() as session:
        for batch in loader:
            train_step(batch)
            session.step()
    print(session.capture.findings)

The machinery is the doctor's own: a :class:`~torchmem.doctor.runner.Run` takes the
per-step reading, a :class:`~torchmem.doctor.probe.DoctorProbe` runs the deep analysis
at its usual boundaries (steps 2, 3, 4, 6, 8, 12, 16...) and diagnoses at the end, and
the step hooks of :mod:`torchmem.doctor.steps` report ``backward()``, ``zero_grad()``
and ``empty_cache()`` calls (the steps themselves are the ``step()`` calls). Culprits
are searched in ``namespace`` (as in a script's ``__main__``), the user frames on the
stack at each ``step()``, and the user's imported modules. The findings are the ones
``torchmem doctor`` gives: cause, culprit with ``file:line``, proof and fix.

Cost: per ``step()`` one heap reading (~10-70 us) plus the probe's bookkeeping; at the
analysis boundaries (about ``2 * log2(steps)`` of them) a walk of what the variables
reach and, at new memory highs, a census (tens of ms each). Between ``start()`` and
``finish()`` every ``backward()`` call costs one more Python call.

Known limitations:
    * One session at a time in a process (the step hooks wrap ``torch.autograd.backward``).
    * Frames of installed packages (site-packages) and of files whose name starts with
      ``<`` are not user code: their locals are not searched for culprits.
    * The growth verdict reads the process's C heap, which other work in the same
      process (other tests, a notebook's earlier cells) also moves; the findings come
      from what the variables hold and do not depend on it.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import sys
import sysconfig
import threading
from types import FrameType, TracebackType
from typing import Any, Callable

from torchmem.errors import UsageError
from torchmem.model.capture import Capture

__all__ = ["DoctorSession", "leak_check"]

_lock = threading.Lock()
_active: list["DoctorSession"] = []


def _library_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    return tuple({p for p in (paths.get("purelib"), paths.get("platlib")) if p})


class DoctorSession:
    """Run the doctor's analysis over steps that the caller marks.

    Args:
        namespace: where culprits are searched first, like a script's ``__main__``
            (default: the globals of the frame that creates the session).
        deep: run the deep analysis at the boundaries (False: growth verdict only).
        label: how the session is named in the capture (its ``argv[0]``).
        interval: seconds between background samples of the memory timeline; ``None``
            (the default) samples nothing besides the step readings.
        frames: also read the variables of the user frames on the stack at each
            ``step()``, from its caller out to the first user frame at or above the code
            that started the session (the frames of whoever called *that* are not the
            code under analysis). False: only ``namespace`` and the user's modules.

    Attributes:
        capture: the :class:`~torchmem.model.capture.Capture` once :meth:`finish` ran.
        steps: steps marked so far.

    Raises:
        UsageError: ``start()`` twice, ``finish()`` before ``start()``, or a second
            session started while one is active.

    Example:
        >>> with torchmem.DoctorSession() as s:        # doctest: +SKIP
        ...     for _ in range(20):
        ...         train_step(); s.step()
        >>> [f.culprit.name for f in s.capture.findings]  # doctest: +SKIP
        ['losses']
    """

    def __init__(self, *, namespace: dict[str, Any] | None = None, deep: bool = True,
                 label: str = "session", interval: float | None = None,
                 frames: bool = True) -> None:
        if namespace is None:
            namespace = sys._getframe(1).f_globals
        if not isinstance(namespace, dict):
            raise UsageError(f"torchmem.DoctorSession: namespace must be a dict; got "
                             f"{type(namespace).__name__}", tip="pass globals() or vars(module)")
        if interval is not None and not interval > 0:
            raise UsageError(f"torchmem.DoctorSession: interval must be > 0 seconds or None; "
                             f"got {interval!r}")
        self.namespace = namespace
        self.deep = deep
        self.label = str(label)
        self.interval = interval
        self.frames = bool(frames)
        self.capture: Capture | None = None
        self._state = "new"
        self._run: Any = None
        self._probe: Any = None
        self._hooks: Any = None
        self._started_at = ""
        self._errors: list[str] = []

    # -- lifecycle ----------------------------------------------------------------------
    def __enter__(self) -> "DoctorSession":
        self._start(sys._getframe(1))
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._state == "active":
            self._finish(exc)
        # returns None: the caller's exception, if any, propagates unchanged

    def start(self) -> "DoctorSession":
        """Install the hooks and begin; returns the session.

        Raises:
            UsageError: the session was started before, or another one is active.
        """
        return self._start(sys._getframe(1))

    def _start(self, caller: FrameType | None) -> "DoctorSession":
        if self._state != "new":
            raise UsageError(f"torchmem.DoctorSession: a session runs once; expected a new "
                             f"session, got one that is {self._state}",
                             tip="create a new DoctorSession for each run")
        from torchmem.doctor.probe import DoctorProbe
        from torchmem.doctor.runner import Run, Target
        from torchmem.doctor.steps import UserFrames

        with _lock:
            if _active:
                raise UsageError("torchmem.DoctorSession: another session is active in this "
                                 f"process ({_active[-1].label!r}); expected one at a time",
                                 tip="finish the other session first")
            _active.append(self)
        try:
            frames = UserFrames(_library_dirs())
            probe = DoctorProbe(deep=self.deep, census_at_end=self.deep)
            script = str(self.namespace.get("__file__") or self.label)
            run = Run(Target(path=self.label), [self.label], script, self.namespace, [probe],
                      None, frames=frames)
            run.step_source = "session"
            run.outermost = _anchor(frames.innermost(caller)) if self.frames else None
            self._started_at = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
            hooks = _EventHooks(run)
            hooks.__enter__()
            self._run, self._probe, self._hooks = run, probe, hooks
            if self.interval:
                run.monitor_interval = self.interval
                run.add_monitor("cpu")
            run._dispatch("on_start")
        except BaseException:
            self._cleanup()
            raise
        self._state = "active"
        return self

    @property
    def steps(self) -> int:
        """Steps marked so far (or in all, once finished)."""
        if self._run is not None:
            return int(self._run.step_count)
        return len(self.capture.steps) if self.capture is not None else 0

    def step(self) -> None:
        """Mark the end of one step: take the reading, run the analysis when it is due.

        Never raises: outside an active session it does nothing, and a failure inside
        torchmem becomes a note of the capture.
        """
        run = self._run
        if self._state != "active" or run is None:
            return
        frame: FrameType | None = None
        try:
            if self.frames:
                frame = run.frames.innermost(sys._getframe(1))
            run._on_step("session", frame)
        except Exception as err:  # noqa: BLE001 - never break the caller's program
            self._note_error("step", err)
        finally:
            del frame

    def finish(self) -> Capture:
        """Remove the hooks, diagnose, and return the capture (also ``self.capture``).

        Calling it again returns the same capture.

        Raises:
            UsageError: the session never started.
        """
        if self._state == "finished" and self.capture is not None:
            return self.capture
        if self._state != "active":
            raise UsageError("torchmem.DoctorSession: finish() needs a started session; "
                             "got one never started", tip="call start() first, or use 'with'")
        return self._finish(None)

    # -- internals ----------------------------------------------------------------------
    def _note_error(self, part: str, err: BaseException) -> None:
        line = f"{part}: {type(err).__name__}: {err}".splitlines()[0]
        if line not in self._errors:
            self._errors.append(line)

    def _cleanup(self) -> None:
        hooks, self._hooks = self._hooks, None
        if hooks is not None:
            try:
                hooks.__exit__(None, None, None)
            except Exception as err:  # noqa: BLE001
                self._note_error("removing hooks", err)
        if self._run is not None:
            try:
                self._run.stop_monitors()
            except Exception as err:  # noqa: BLE001
                self._note_error("stopping the sampler", err)
        with _lock:
            if self in _active:
                _active.remove(self)

    def _finish(self, exc: BaseException | None) -> Capture:
        from torchmem.doctor._ending import Outcome, innermost_user_frame
        from torchmem.doctor._summary import census_summary
        from torchmem.doctor.probe import ANALYSIS_FAILED
        from torchmem.doctor.run_result import build_result
        from torchmem.errors import is_oom

        run, probe = self._run, self._probe
        self._state = "finished"
        self._cleanup()
        outcome = Outcome("ok", 0)
        if isinstance(exc, KeyboardInterrupt):
            outcome = Outcome("interrupt", 130, exc)
        elif isinstance(exc, SystemExit):
            outcome = Outcome("exit", exc.code if isinstance(exc.code, int) else 1, exc)
        elif exc is not None:
            outcome = Outcome("oom" if is_oom(exc) else "exception", 1, exc)
        try:
            if exc is not None and outcome.kind != "exit":
                outcome.frame = innermost_user_frame(exc.__traceback__, run.frames)
            run._dispatch("on_finish", outcome)
            result = build_result(run, outcome, self._started_at)
            top, roles, modules = census_summary(probe.census)
            notes = list(probe.notes) + [g.reason for g in probe.growth
                                         if g.verdict == "undecided"]
            notes += [f"{ANALYSIS_FAILED} {line}" for line in self._errors]
            self.capture = result.to_capture("torchmem doctor", findings=probe.findings,
                                             growth=probe.growth, top_storages=top,
                                             bytes_by_role=roles, bytes_by_module=modules,
                                             notes=notes)
            self.capture = dataclasses.replace(self.capture, holders=probe.holders())
        except Exception as err:  # noqa: BLE001 - diagnose what can be, never raise
            self._note_error("diagnosis", err)
            self.capture = Capture(tool="torchmem doctor", version=_version(),
                                   argv=(self.label,), started_at=self._started_at,
                                   duration_s=0.0, exit_code=outcome.exit_code,
                                   outcome=outcome.kind, step_source="session",
                                   notes=tuple(f"{ANALYSIS_FAILED} {e}" for e in self._errors))
        finally:
            outcome.exc = None
            outcome.frame = None
            self._run = self._probe = None
        return self.capture


def _version() -> str:
    from torchmem import __version__

    return __version__


def _anchor(frame: FrameType | None) -> Callable[[FrameType], bool] | None:
    """A test for ``frame`` that holds no reference to it (the session may outlive it:
    then nothing matches, and the whole stack is read)."""
    if frame is None:
        return None
    ident, code = id(frame), frame.f_code
    return lambda f: f.f_code is code and id(f) == ident


class _EventHooks:
    """The doctor's step hooks reporting events only: the session's steps are its own
    ``step()`` calls, so the optimizer, backward and forward boundaries are not steps
    here and the module forward hooks are removed at once."""

    def __init__(self, run: Any) -> None:
        from torchmem.doctor.steps import StepHooks

        self._run = run
        self._hooks = StepHooks(self._on_step, self._on_event, run.frames, loops=False)

    def _on_step(self, source: str, frame: FrameType | None) -> None:
        """Optimizer/backward/forward boundaries are not the session's steps."""

    def _on_event(self, name: str, info: dict[str, Any]) -> None:
        if name != "step_source":  # a source change would reset the session's steps
            self._run._on_event(name, info)

    def __enter__(self) -> "_EventHooks":
        self._hooks.__enter__()
        self._hooks._remove_forward_hooks()
        return self

    def __exit__(self, *exc: object) -> None:
        self._hooks.__exit__(*exc)


def leak_check(fn: Callable[..., Any], steps: int = 20, *, args: tuple[Any, ...] = (),
               kwargs: dict[str, Any] | None = None,
               namespace: dict[str, Any] | None = None, frames: bool = True) -> Capture:
    """Call ``fn(*args, **kwargs)`` ``steps`` times under a :class:`DoctorSession`.

    Each call is one step. An exception from ``fn`` propagates unchanged (the session is
    finished and its hooks removed first).

    Args:
        fn: the step function.
        steps: how many times to call it (at least 4: the analysis compares the
            snapshots of steps 2, 3 and 4 before it calls anything a leak).
        args, kwargs: passed to each call.
        namespace: where culprits are searched (default: ``fn``'s module globals).
        frames: also search the user frames from the caller of ``leak_check`` inwards
            (the closure of a local ``fn`` lives there); see :class:`DoctorSession`.

    Returns:
        The session's :class:`~torchmem.model.capture.Capture`: ``findings`` is empty
        when nothing accumulates across calls.

    Raises:
        UsageError: ``steps`` is below 4 or ``fn`` is not callable.

    Example:
        >>> capture = torchmem.leak_check(train_step, steps=20)   # doctest: +SKIP
        >>> capture.findings[0].culprit.name                      # doctest: +SKIP
        'losses'
    """
    if not callable(fn):
        raise UsageError(f"torchmem.leak_check: fn must be callable; got {type(fn).__name__}")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 4:
        raise UsageError(f"torchmem.leak_check: steps must be an int >= 4; got {steps!r}",
                         tip="the analysis compares steps 2, 3 and 4 before it calls a leak")
    if namespace is None:
        namespace = getattr(fn, "__globals__", None)
        if not isinstance(namespace, dict):
            namespace = sys._getframe(1).f_globals
    label = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    kwargs = dict(kwargs or {})
    session = DoctorSession(namespace=namespace, label=str(label), frames=frames)
    session._start(sys._getframe(1))
    try:
        for _ in range(steps):
            fn(*args, **kwargs)
            session.step()
    except BaseException as exc:
        session._finish(exc)
        raise
    return session._finish(None)
