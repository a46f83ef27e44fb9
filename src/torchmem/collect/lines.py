"""Private engine of ``torchmem lines``: which source line made each CPU storage.

A :class:`LineRecorder` watches torchmem's storage engine (:mod:`torchmem.collect._engine`,
the dispatch mode behind ``torchmem.track(exact=True)``) during *windows*, one profiled
step each. For every storage the engine sees created in a window, it finds the line of
code that made it (:class:`~torchmem.collect.sites.SiteFinder`: the innermost frame of
the user's code) and tags the engine's weak reference with it; every free of a tagged
storage (in a window or not) is charged back to that line. Each window is an exact
tracker region, so the engine knows every live storage when it begins (its ledger):
frees of storages of unknown origin are counted as *unattributed*, and the per-line net
bytes plus the unattributed bytes equal the tracker's measured delta exactly.

For storages of at least ``stack_min_bytes`` it also keeps the full allocating stack
and the tensor's shape and dtype: the allocation sites of the largest storages. Stacks
are cached by (user line, innermost calling line, size): a later storage of the same
size made through the same two lines shares the first one's stack, even if the frames
in between differ.

Cost, inside a window: the dispatch mode's (one Python call per aten op; see
``benchmarks/lines.py``), plus 1-2 us per storage created (a walk up to the user's
frame, a few dictionary updates) and one list append per free. Outside windows: one
callback per free of a storage made in a window, nothing per op. Memory: one small
tuple per tagged live storage, and the window's events until it ends.

Known limitations:
    * The engine's limits apply: storages made outside the dispatcher (``torch.load``,
      ``torch.from_numpy``) or on other threads are not seen being created; their frees
      show as unattributed.
    * Storages made between windows have no line: at the next window they are part of
      the ledger, and their frees are unattributed.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from torchmem.analyze.line_windows import LineTotals, PeakState, Site, WindowTally
from torchmem.collect._engine import engine
from torchmem.collect.sites import SiteFinder
from torchmem.collect.storage import dtype_name
from torchmem.collect.tracker import Tracker
from torchmem.errors import UsageError

__all__ = ["LineRecorder", "Birth"]

#: ``(site, serial number of its window, (stack, shape, dtype) or None)`` tagged on a
#: storage (:meth:`LineRecorder.made_in` names the window)
Birth = tuple[Site, int, Any]


class LineRecorder:
    """Attributes CPU storages to source lines during profiled windows.

    Args:
        finder: decides which frame a storage is attributed to.
        stack_min_bytes: keep the full stack, shape and dtype of storages at least
            this large.

    Attributes:
        totals: per-line sums over the finished windows (:class:`LineTotals`).
        windows: the finished windows' :class:`WindowTally` (events dropped).
        peak_storages: ``[bytes, engine reference, role, name]`` of the largest storages
            alive at the highest peak so far, largest first (the reference's ``site``
            attribute is its :data:`Birth`, when it has one; role and name are filled
            in from a census by the caller).
    """

    def __init__(self, finder: SiteFinder, stack_min_bytes: int = 4096,
                 peak_storages: int = 10) -> None:
        self.finder = finder
        self.stack_min_bytes = stack_min_bytes
        self.totals = LineTotals("cpu")
        self.windows: list[WindowTally] = []
        self.peak_storages: list[list[Any]] = []
        self._keep_peak = peak_storages
        self._window: WindowTally | None = None
        self._tracker: Tracker | None = None
        self._started = 0.0
        self._serial = -1
        self._labels: list[str] = []
        self._stacks: dict[tuple[Any, ...], Any] = {}
        self._installed = False
        self._had_ledger = False

    # -- life cycle ------------------------------------------------------------------
    def install(self) -> None:
        """Become the engine's observer (one recorder at a time).

        Raises:
            UsageError: another recorder is installed (``torchmem lines`` inside
                ``torchmem lines``).
        """
        if engine.observer is not None and engine.observer is not self:
            raise UsageError("torchmem lines: another line profile is already running in "
                             "this process; expected one at a time")
        engine.observer = self
        self._had_ledger = "cpu" in engine._kept
        self._installed = True

    def uninstall(self) -> None:
        """Stop observing; an open window is ended first. The engine's ledger of live
        storages that the windows started is dropped again (it costs a callback per
        free for as long as it lives), unless it existed before :meth:`install`."""
        try:
            if self._window is not None:
                self.end()
        finally:
            if engine.observer is self:
                engine.observer = None
            if self._installed and not self._had_ledger:
                engine.forget("cpu")
            self._installed = False

    @property
    def active(self) -> bool:
        """A window is open."""
        return self._window is not None

    def begin(self, step: int, kind: str = "step", paired: bool = True) -> None:
        """Open the window of ``step``: an exact tracker region. ``kind``: ``step`` (a
        whole training step), ``setup`` or ``end`` (see :class:`LineWindow`);
        ``paired``: the previous step was profiled too."""
        if self._window is not None:
            self.end()
        self._started = time.perf_counter()
        window = WindowTally(step, "cpu", kind == "step")
        window.paired = paired
        tracker = Tracker("cpu", exact=True)
        tracker.__enter__()
        # the ledger knows every live storage now: the window starts from them
        start: dict[Site | None, int] = {}
        tokens: dict[int, tuple[Any, Site | None, int]] = {}
        for ref in list(engine._refs.values()):
            if ref.dev != "cpu":
                continue
            birth = getattr(ref, "site", None)
            site = birth[0] if birth is not None else None
            start[site] = start.get(site, 0) + ref.nbytes
            tokens[id(ref)] = (ref, site, ref.nbytes)
        window.start_live, window.start_tokens = start, tokens
        self._serial = len(self._labels)
        self._labels.append(f"step {step}" if kind == "step" else kind)
        self._tracker, self._window = tracker, window

    def end(self, kind: str | None = None) -> WindowTally | None:
        """Close the open window (``kind``: overrides what :meth:`begin` said); return
        it (its events dropped) or None."""
        window, tracker = self._window, self._tracker
        if window is None or tracker is None:
            return None
        self._window = self._tracker = None
        tracker.__exit__(None, None, None)
        if kind is not None:
            window.steady = kind == "step"
            self._labels[self._serial] = f"step {window.step}" if kind == "step" else kind
        window.measured_delta = tracker.delta
        best = self.totals.peak.bytes if self.totals.peak is not None else -1
        peak = window.peak()
        window.peak_bytes = peak.bytes
        if peak.bytes > best:
            peak = window.peak(with_tokens=True)
            self._keep_storages(peak)
            peak.tokens = {}
        self.totals.add(window, peak)
        window.events = []
        window.start_tokens = {}
        window.seconds = time.perf_counter() - self._started
        self.windows.append(window)
        return window

    def _keep_storages(self, peak: PeakState) -> None:
        never = float("inf")

        def order(item: tuple[Any, int]) -> tuple[Any, ...]:  # ties: the earliest made
            birth = getattr(item[0], "site", None)
            return (-item[1], birth[1] if birth is not None else never,
                    birth[0] if birth is not None else ("", 0, ""))

        largest = sorted(peak.tokens.values(), key=order)[: self._keep_peak]
        self.peak_storages = [[n, ref, None, None] for ref, n in largest]

    # -- engine observer ---------------------------------------------------------------
    def created(self, ref: Any, t: Any) -> None:
        window = self._window
        if window is None or ref.dev != "cpu":
            return
        frame = sys._getframe(1)
        site = self.finder.site(frame)
        n = ref.nbytes
        extra = None
        if n >= self.stack_min_bytes:
            key = (site, self.finder.inner(frame), n)
            stack = self._stacks.get(key)
            if stack is None:
                stack = self.finder.stack(frame)
                if len(self._stacks) < 10_000:
                    self._stacks[key] = stack
            extra = (stack, _shape(t), _dtype(t))
        ref.site = (site, self._serial, extra)
        # window.add(site, n, ref), inlined: this runs once per storage created
        window.events.append((site, n, ref))
        created = window.created
        created[site] = created.get(site, 0) + n
        count = window.count
        count[site] = count.get(site, 0) + 1

    def resized(self, ref: Any, grow: int) -> None:
        window = self._window
        if window is None or ref.dev != "cpu":
            return
        birth = getattr(ref, "site", None)
        if grow > 0:
            window.add(birth[0] if birth is not None else None, grow, ref, new=False)
        else:
            site = birth[0] if birth is not None else None
            window.remove(site, -grow, ref, own=birth is not None and birth[1] == self._serial)

    def freed(self, ref: Any) -> None:
        window = self._window
        if window is None or ref.dev != "cpu":
            return
        birth = getattr(ref, "site", None)
        if birth is None:
            window.remove(None, ref.nbytes, ref, own=False)
        else:
            window.remove(birth[0], ref.nbytes, ref, own=birth[1] == self._serial)

    # -- queries -------------------------------------------------------------------------
    def made_in(self, birth: Birth | None) -> str | None:
        """The window a storage was made in (``step 3``, ``setup``, ``end``), or None."""
        if birth is None or not 0 <= birth[1] < len(self._labels):
            return None
        return self._labels[birth[1]]

    @property
    def serial(self) -> int:
        """Windows opened so far (a storage whose birth serial is lower was made before
        now)."""
        return len(self._labels)

    def birth_of(self, key: int) -> Birth | None:
        """The birth tag of the live storage ``key`` (``storage_key``), if it has one."""
        ref = engine._refs.get(key)
        if ref is None or ref() is None:
            return None
        return getattr(ref, "site", None)


def _shape(t: Any) -> tuple[int, ...] | None:
    try:
        return tuple(int(d) for d in t.shape) if t is not None else None
    except Exception:  # noqa: BLE001 - a subclass without a plain shape
        return None


def _dtype(t: Any) -> str | None:
    try:
        return dtype_name(t.dtype) if t is not None else None
    except Exception:  # noqa: BLE001
        return None
