"""The live view of ``torchmem run --live`` and ``torchmem doctor --live`` (rich; no torch).

A panel at the bottom of the terminal, on stderr, shows while the script runs: memory per
device (now, peak, growth since the first step, growth per step, a sparkline of the last
steps), the step count and what counts as a step, the phase (and, under the doctor, its
analysis schedule), and the top holders of the doctor's most recent census.

Cost and where it is paid:

* In the script's thread, at each step boundary, :meth:`LiveProbe.on_step` stores the
  step's record and bumps a counter: a few attribute writes, no rendering, no reading.
* A daemon thread wakes every :data:`REFRESH_S` seconds (at most 4 refreshes a second)
  and, only when something changed (a new step, a new census, or a second passed),
  renders the panel with rich into a string (under 1 ms: a few ``Text`` lines) and
  writes it. It never takes a
  census or a reading of its own: holders come from the census the doctor already took.
* While the panel is up, the script's ``sys.stderr`` (and ``sys.stdout`` when it is a
  terminal too) are wrapped so that a write first erases the panel, then goes through
  unchanged; the panel comes back at the next refresh. What the script writes reaches its
  stream byte for byte; when stdout is not a terminal it is not wrapped at all. In a
  forked child (a ``DataLoader`` worker) the wrapper writes straight through: the panel
  is the parent's, and its lock may have been held by the parent's refresh thread.

The view is on only when stderr is a terminal (and ``TERM`` is not ``dumb``);
:func:`live_refusal` says why not otherwise.

Known limitations:
    * A line the script leaves unfinished (a ``tqdm`` bar redrawn with ``\\r``) keeps the
      panel hidden until the script ends that line: drawing under it would garble both.
    * Output written around ``sys.stdout``/``sys.stderr`` (``os.write(1, ...)``, a child
      process, C code) is not seen: the next refresh may erase a few of its lines from
      the screen (not from the stream, which is unchanged).
"""

from __future__ import annotations

import io
import os
import shutil
import sys
import threading
import time
from collections import deque
from typing import IO, Any, Callable, Sequence

from rich.console import Console, Group
from rich.text import Text

from torchmem.report.sanitize import printable
from torchmem.units import format_bytes, format_delta

__all__ = ["LiveProbe", "LiveState", "render_panel", "live_refusal", "REFRESH_S"]

#: seconds between refreshes (at most)
REFRESH_S = 0.25
#: steps kept for the sparkline
HISTORY = 60
_BARS = "▁▂▃▄▅▆▇█"
_SOURCE = {"optimizer": "optimizer.step() calls", "backward": "backward() calls",
           "forward": "top-level model forward calls", "none": "no steps yet"}
_PHASE = {"optimizer": "training", "backward": "training (no optimizer found)",
          "forward": "evaluation or inference (forward calls)", "none": "starting"}


def live_refusal(stream: IO[str]) -> str | None:
    """Why the live view cannot run on ``stream`` (None: it can)."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError, OSError):
        tty = False
    if not tty:
        return "stderr is not a terminal"
    if os.environ.get("TERM", "") == "dumb":
        return "TERM is dumb (no cursor movement)"
    return None


class LiveState:
    """What the panel shows, as plain data (built by the refresh thread)."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.step = 0
        self.elapsed = 0.0
        self.step_source = "none"
        self.used: dict[str, int] = {}
        self.first: dict[str, int] = {}
        self.peak: dict[str, int] = {}
        self.history: dict[str, list[int]] = {}
        self.phase = ""
        self.holders: list[tuple[str, str, int]] = []
        self.holders_note = ""
        self.done = False


def _spark(values: Sequence[int]) -> str:
    if len(values) < 2:
        return ""
    low, high = min(values), max(values)
    if high <= low:
        return _BARS[0] * len(values)
    scale = (len(_BARS) - 1) / (high - low)
    return "".join(_BARS[int(round((v - low) * scale))] for v in values)


def render_panel(state: LiveState, width: int = 100) -> Group:
    """The panel for ``state``, ``width`` columns wide: a few rich ``Text`` lines (columns
    laid out here, not by a rich ``Table``, whose layout costs ~20x more per refresh)."""
    lines: list[Text] = []
    head = Text(printable(state.title, 200), style="bold")
    steps = f"step {state.step}" if state.step else "waiting for the first step"
    head.append(f"  {steps} ({_SOURCE.get(state.step_source, state.step_source)}), "
                f"{state.elapsed:.1f} s")
    lines.append(head)
    if state.used:
        names = {d: printable(d, 40) for d in state.used}
        name_width = max(6, *(len(n) for n in names.values()))
        # the sparkline gets what is left of the line (the last steps that fit)
        room = max(8, min(HISTORY, width - name_width - 52))
        shown = min(room, max((len(v) for v in state.history.values()), default=0))
        last = f"last {shown} steps" if room >= 14 else f"last {shown}"
        lines.append(Text(f"{'device':<{name_width}}  {'now':>10}  {'peak':>10}  "
                          f"{'since step 1':>12}  {'per step':>10}  {last}", style="bold"))
        for device, used in state.used.items():
            first = state.first.get(device)
            growth = used - first if first is not None else None
            per = growth / (state.step - 1) if growth is not None and state.step > 1 else None
            row = Text(f"{names[device]:<{name_width}}  {format_bytes(used):>10}  "
                       f"{format_bytes(state.peak.get(device, used)):>10}  "
                       f"{format_delta(growth) if growth is not None else '':>12}  "
                       f"{format_delta(per) if per is not None else '':>10}  ")
            row.append(_spark(state.history.get(device, [])[-room:]), style="cyan")
            lines.append(row)
    if state.phase:
        lines.append(Text(f"phase: {printable(state.phase, 300)}"))
    if state.holders:
        line = Text(f"top holders{state.holders_note}: ", style="bold")
        line.append("; ".join(f"{printable(name, 60)} ({role}) {format_bytes(n)}"
                              for name, role, n in state.holders))
        lines.append(line)
    for line in lines:
        line.no_wrap, line.overflow = True, "ellipsis"
    return Group(*lines)


class _Screen:
    """The panel's lines at the bottom of the terminal, erased before anything else is
    written there (all writes hold :attr:`lock`)."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.lock = threading.RLock()
        self.height = 0
        self.partial = False  # the script left a line unfinished

    def erase(self) -> None:
        if self.height:
            self.stream.write(f"\r\x1b[{self.height}A\x1b[J")
            self.stream.flush()
            self.height = 0

    def draw(self, text: str, before: Sequence[Any] = ()) -> None:
        """Replace the panel with ``text``, after flushing the script's ``before`` streams
        (so that their lines land above it); skipped while a line is unfinished."""
        with self.lock:
            if self.partial:
                return
            for stream in before:
                stream.flush()
            old = f"\r\x1b[{self.height}A\x1b[J" if self.height else ""
            self.stream.write(old + text)
            self.stream.flush()
            self.height = text.count("\n")


class _GuardedStream:
    """A script stream that erases the panel before each write (the text goes through
    unchanged); everything else is the wrapped stream's."""

    def __init__(self, inner: Any, screen: _Screen) -> None:
        self._inner = inner
        self._screen = screen
        self._pid = os.getpid()

    def write(self, text: str) -> int:
        if os.getpid() != self._pid:  # a forked child (a DataLoader worker): no panel
            return int(self._inner.write(text))  # there, and the lock may be held
        screen = self._screen
        with screen.lock:
            try:
                screen.erase()
            except Exception:  # noqa: BLE001 - the panel must never break the script's output
                pass
            n = self._inner.write(text)
            if text:
                screen.partial = not text.endswith("\n")
            return n

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class LiveProbe:
    """A runner probe that keeps the live panel up to date (see the module docstring).

    Args:
        stream: the terminal stream (torchmem's stderr from before the run).
        title: the panel's first words, e.g. ``torchmem run: train.py``.
        holders: called by the refresh thread: ``(census_step, [(name, role, bytes)...])``
            of the most recent census, or None; must be cheap (no census of its own).
        phase: called by the refresh thread with the step: extra words for the phase line.
    """

    def __init__(self, stream: IO[str], title: str, *,
                 holders: Callable[[], tuple[int, list[tuple[str, str, int]]] | None] | None = None,
                 phase: Callable[[int], str] | None = None) -> None:
        self._stream = stream
        self._title = title
        self._holders = holders
        self._phase = phase
        self._screen = _Screen(stream)
        self._run: Any = None
        self._version = 0
        self._records: deque[Any] = deque(maxlen=HISTORY)
        self._count = 0
        self._first: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._wrapped: list[tuple[str, Any, _GuardedStream]] = []
        self._t0 = time.perf_counter()
        #: what the panel cost: refreshes drawn, seconds spent rendering them, and the
        #: CPU seconds of the refresh thread (set when it ends)
        self.refreshes = 0
        self.render_s = 0.0
        self.cpu_s = 0.0
        self.error: str | None = None

    # -- probe hooks (script thread) ------------------------------------------------------
    def on_start(self, run: Any) -> None:
        self._run = run
        self._t0 = time.perf_counter()
        self._wrap()
        self._thread = threading.Thread(target=self._loop, name="torchmem-live", daemon=True)
        self._thread.start()

    def on_step(self, run: Any, step: int, frame: Any) -> None:
        record = run.steps[-1] if run.steps else None
        if record is not None:
            self._records.append(record)
            self._count = run.step_count
            if not self._first or self._count == 1:
                self._first = dict(record.used)
        self._version += 1

    def on_event(self, run: Any, name: str, info: dict[str, Any]) -> None:
        if name == "step_source":
            self._records.clear()
            self._first = {}
            self._version += 1

    def on_finish(self, run: Any, outcome: Any) -> None:
        self.close()

    # -- the refresh thread ----------------------------------------------------------------
    def _loop(self) -> None:
        seen: tuple[Any, ...] = ()
        last = 0.0
        try:
            while not self._stop.wait(REFRESH_S):
                holders = self._holders() if self._holders is not None else None
                key = (self._version, holders[0] if holders else None, self._screen.partial)
                now = time.perf_counter()
                if key == seen and now - last < 1.0:
                    continue
                seen, last = key, now
                self._refresh(holders)
        except Exception as err:  # noqa: BLE001 - the panel must never break the run
            self.error = f"{type(err).__name__}: {err}"
        finally:
            self.cpu_s = time.thread_time()

    def _state(self, holders: tuple[int, list[tuple[str, str, int]]] | None) -> LiveState:
        run = self._run
        state = LiveState(self._title)
        state.elapsed = time.perf_counter() - self._t0
        records = list(self._records)
        state.step = self._count
        state.step_source = getattr(run, "step_source", "none") if run is not None else "none"
        if records:
            state.used = dict(records[-1].used)
            state.first = dict(self._first)
            for device in state.used:
                state.history[device] = [r.used[device] for r in records if device in r.used]
        if run is not None:
            state.peak = dict(getattr(getattr(run, "step_log", None), "peak", {}) or {})
            for device, monitor in list(getattr(run, "monitors", {}).items()):
                sample = getattr(monitor, "peak", None)
                used = getattr(sample, "used", None)
                if used is not None and device in state.used:
                    state.peak[device] = max(state.peak.get(device, 0), int(used))
        state.phase = _PHASE.get(state.step_source, state.step_source)
        if self._phase is not None:
            extra = self._phase(state.step)
            if extra:
                state.phase += f"; {extra}"
        if holders:
            step, rows = holders
            state.holders = rows[:3]
            state.holders_note = f" (census at step {step})"
        return state

    def _refresh(self, holders: Any) -> None:
        t0 = time.perf_counter()
        width = max(40, min(shutil.get_terminal_size((100, 24)).columns, 200) - 1)
        buffer = io.StringIO()
        console = Console(file=buffer, width=width, force_terminal=True, highlight=False,
                          color_system=None if os.environ.get("NO_COLOR") else "standard")
        console.print(render_panel(self._state(holders), width), crop=True, overflow="ellipsis",
                      no_wrap=True)
        self._screen.draw(buffer.getvalue(), [inner for _, inner, _ in self._wrapped])
        self.refreshes += 1
        self.render_s += time.perf_counter() - t0

    # -- streams -----------------------------------------------------------------------------
    def _wrap(self) -> None:
        for name in ("stderr", "stdout"):
            current = getattr(sys, name)
            if current is None or isinstance(current, _GuardedStream):
                continue
            if name == "stdout":
                try:
                    if not current.isatty():
                        continue
                except (AttributeError, ValueError, OSError):
                    continue
            guarded = _GuardedStream(current, self._screen)
            setattr(sys, name, guarded)
            self._wrapped.append((name, current, guarded))

    def close(self) -> None:
        """Stop refreshing, erase the panel, give the script's streams back; idempotent."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=2.0)
        with self._screen.lock:
            try:
                self._screen.erase()
            except Exception:  # noqa: BLE001 - a closed stderr: nothing to erase
                pass
        for name, original, guarded in self._wrapped:
            if getattr(sys, name) is guarded:  # the script may have replaced it
                setattr(sys, name, original)
        self._wrapped.clear()
