"""The pytest plugin's measurement of a test body: its tensor peak and what made it.

:class:`PeakWatch` wraps one call of a test function in ``torchmem.track(device,
exact=True)``: on the CPU the peak is exact live tensor bytes (the engine of
:mod:`torchmem.collect._engine`), on CUDA the caching allocator's peak
(``max_memory_allocated`` after ``reset_peak_memory_stats``). The figure the plugin
judges is the peak *above what was live when the body began* (``peak_delta``), so a
test's number does not depend on what earlier tests left alive.

To say what made the peak, a second private dispatch mode (above the engine's) looks
at the body's bytes after every aten op and takes a census of the live tensors
(:func:`torchmem.census`) at two kinds of moments:

* when the body first goes above ``limit`` (the peak gate): the largest live storages
  then, each with its role and who holds it -- an owner named by the census
  (``encoder.fc1.weight``, ``saved by MmBackward0``) or a variable of the test's frames
  (``acts[2]``, local of ``test_big``);
* for the baseline (``levels=True``), from 1 MiB of body bytes on: at new highs 1.5x
  above the previous census, when ``backward()`` begins (activations are at their
  largest then) and ends (gradients), and after ``optimizer.step()`` (its state), at
  most :data:`MAX_CENSUSES` times. Each gives the bytes by role of
  the storages the body created; the largest figure of each role is kept. They do not
  depend on where in the body one census happens to fall, so they compare between runs.

Cost: one Python call per aten op for the engine (CPU) and one for the watch; a census
(tens of ms) only at those moments. Nothing of the test is held: storages are named by
key, holders by strings.

Known limitations:
    * A census runs only on the thread that called the test; a crossing seen on another
      thread (CUDA backward runs on autograd's device threads) is described at the next
      op on the test's thread, or at the end of the body.
    * On CUDA a peak inside one kernel (workspaces) is not an op boundary: the figure is
      the allocator's, the census is the one nearest to it.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from torchmem._pytest_holders import holders, in_backward, op_name, outputs, user_site
from torchmem.collect import _engine
from torchmem.collect.graph import storage_key
from torchmem.collect.tracker import Tracker

__all__ = ["PeakWatch", "PeakResult", "StorageLine", "MAX_CENSUSES", "LEVEL_FACTOR",
           "LEVEL_FLOOR"]

#: censuses at new highs: each one 1.5x above the previous, from 1 MiB of body bytes
LEVEL_FACTOR = 1.5
LEVEL_FLOOR = 1 << 20
MAX_CENSUSES = 12
#: storages listed in a failure message
TOP = 5


@dataclass
class StorageLine:
    """One large live storage at the moment described (plain data)."""

    nbytes: int
    dtype: str
    shape: tuple[int, ...]
    role: str
    holder: str | None
    body: bool  # created by the test body (not alive before it began)


@dataclass
class PeakResult:
    """What one body did to memory (plain data).

    Attributes:
        device: the device measured; ``source``: ``engine`` or ``allocator``.
        peak_delta: highest bytes above the start reached by the body.
        peak: the absolute peak (live tensor bytes on CPU, allocated bytes on CUDA).
        at_start: bytes live when the body began.
        limit: the gate's limit, if any; ``crossed_at``: body bytes when the census of
            the crossing was taken.
        crossing: the op and the test's line where it went above.
        top: the largest live storages at the crossing.
        roles_then: bytes by role of the body's storages at the crossing.
        role_peaks: the largest bytes each role of the body's storages reached at the
            censuses (``levels=True``); ``censuses``: how many were taken.
        notes: what could not be measured.
    """

    device: str
    source: str
    peak_delta: int
    peak: int
    at_start: int
    limit: int | None = None
    crossed_at: int | None = None
    crossing: str | None = None
    top: list[StorageLine] = field(default_factory=list)
    roles_then: dict[str, int] = field(default_factory=dict)
    role_peaks: dict[str, int] = field(default_factory=dict)
    censuses: int = 0
    notes: list[str] = field(default_factory=list)


class _Watch(TorchDispatchMode):
    """Looks at the body's bytes after each op (above the engine's mode)."""

    def __init__(self, watch: "PeakWatch") -> None:
        super().__init__()
        self._watch = watch

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        self._watch._after_op(func, out)
        return out


class PeakWatch:
    """Measure one test body (a context manager; see the module docstring).

    Args:
        device: ``"cpu"``, ``"cuda"``, ``"cuda:1"``...
        limit: the gate's limit in bytes above the start (None: no gate).
        levels: take the censuses that give the largest bytes per role.
    """

    def __init__(self, device: str, *, limit: int | None = None, levels: bool = False) -> None:
        self.tracker = Tracker(device, exact=True)
        self.limit = limit
        self.levels = levels
        self.result: PeakResult | None = None
        #: ``op at file:line `code` `` where the body went above the limit
        self.crossing: str | None = None
        self._mode: _Watch | None = None
        self._backward: Any = None
        self._thread = threading.get_ident()
        self._crossed = False
        self._pending: str | None = None
        self._next_level = LEVEL_FLOOR
        self._censuses = 0
        self._before: dict[int, Any] = {}
        self._before_keys: set[int] | None = None
        self._busy = False
        self._top: list[StorageLine] = []
        self._crossed_at: int | None = None
        self._roles_then: dict[str, int] = {}
        self._role_peaks: dict[str, int] = {}
        self._notes: list[str] = []

    def __enter__(self) -> "PeakWatch":
        t = self.tracker
        t.__enter__()
        try:
            if t.source == "engine":
                # storages alive before the body, by weak reference: a key whose storage
                # died and whose number came back is the body's
                refs = _engine.engine._refs
                self._before = {k: r for k, r in list(refs.items()) if r.dev == t.device}
            elif self.levels:
                from torchmem.collect.census import census

                self._before_keys = {e.key for e in census().storages if e.device == t.device}
            if self.levels:
                self._wrap_backward()
            if self.limit is not None or self.levels:
                self._mode = _Watch(self)
                self._mode.__enter__()
        except BaseException:
            self._unwrap_backward()
            t.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        t = self.tracker
        try:
            if self._mode is not None:
                self._mode.__exit__(None, None, None)
                self._mode = None
            self._unwrap_backward()
            if self._pending is not None:
                self._describe(self._pending)
        finally:
            t.__exit__(*exc)
        peak_delta = t.peak_delta
        if self.limit is not None and peak_delta > self.limit and not self._top:
            self._notes.append("no census: the peak was not at an op boundary of the test's "
                               "thread (a kernel's workspace, or another thread)")
        baseline = t.baseline.tensor_bytes if t.source == "engine" else t.baseline.used
        self.result = PeakResult(
            device=t.device, source=t.source, peak_delta=peak_delta, peak=t.peak,
            at_start=int(baseline or 0), limit=self.limit, crossed_at=self._crossed_at,
            crossing=self.crossing, top=self._top, roles_then=self._roles_then,
            role_peaks=self._role_peaks, censuses=self._censuses, notes=self._notes)
        self._before = {}

    # -- backward: activations are at their largest when it begins ------------------------
    def _wrap_backward(self) -> None:
        original = torch.autograd.backward
        watch = self

        def backward(*args: Any, **kwargs: Any) -> Any:
            watch._phase("backward")  # activations at their largest
            result = original(*args, **kwargs)
            watch._phase("after backward")  # gradients at their largest
            return result

        backward.__wrapped__ = original  # type: ignore[attr-defined]
        torch.autograd.backward = backward  # type: ignore[assignment]
        from torch.optim.optimizer import register_optimizer_step_post_hook

        handle = register_optimizer_step_post_hook(
            lambda *_: watch._phase("optimizer step"))  # optimizer state made
        self._backward = (original, backward, handle)

    def _phase(self, why: str) -> None:
        if (threading.get_ident() == self._thread and self._censuses < MAX_CENSUSES
                and not self._busy and self.tracker.delta >= LEVEL_FLOOR):
            self._describe(why)

    def _unwrap_backward(self) -> None:
        if self._backward is None:
            return
        original, mine, handle = self._backward
        self._backward = None
        handle.remove()
        if torch.autograd.backward is mine:  # someone else wrapped it since: leave theirs
            torch.autograd.backward = original  # type: ignore[assignment]

    # -- per op -----------------------------------------------------------------------
    def _after_op(self, func: Any = None, out: Any = None) -> None:
        if self._busy:
            return
        try:
            delta = self.tracker.delta
        except Exception:  # noqa: BLE001 - never break the test's op
            return
        why = self._pending
        if not self._crossed and self.limit is not None and delta > self.limit:
            self._crossed = True
            why = "crossed"
        elif (self.levels and why is None and delta >= self._next_level
              and self._censuses < MAX_CENSUSES):
            self._next_level = max(int(delta * LEVEL_FACTOR), LEVEL_FLOOR)
            why = "level"
        if why is None:
            return
        if threading.get_ident() != self._thread:
            self._pending = why if why == "crossed" or self._pending is None else self._pending
            return
        self._pending = None
        self._describe(why, func, out)

    def _is_body(self, key: int) -> bool:
        if self._before_keys is not None:
            return key not in self._before_keys
        ref = self._before.get(key)
        return ref is None or ref() is None

    def _describe(self, why: str, func: Any = None, out: Any = None) -> None:
        """Take a census now (all modes off) and keep what it says; ``func`` and ``out``
        are the op that just ran and its result."""
        from torchmem.collect.census import census

        self._busy = True
        try:
            with _disable_current_modes():
                delta = self.tracker.delta
                taken = census()
                self._censuses += 1
                device = self.tracker.device
                mine = [e for e in taken.storages if e.device == device]
                roles: dict[str, int] = {}
                for e in mine:
                    if self._is_body(e.key):
                        roles[e.role] = roles.get(e.role, 0) + e.nbytes
                for role, nbytes in roles.items():
                    self._role_peaks[role] = max(self._role_peaks.get(role, 0), nbytes)
                if why == "crossed":
                    self._crossed_at, self._roles_then = delta, roles
                    top = sorted(mine, key=lambda e: -e.nbytes)[:TOP]
                    names = holders(sys._getframe(), {e.key for e in top if e.role == "other"})
                    op = op_name(func)
                    for t in outputs(out):
                        key = storage_key(t)
                        if key is not None and key not in names:
                            names[key] = f"the result of {op}, the op that went above"
                    self.crossing = user_site(sys._getframe(), op)
                    unnamed = None
                    if in_backward(sys._getframe()):
                        self.crossing += " (inside backward())"
                        unnamed = "not held by a variable: an intermediate of backward()"
                    self._top = [StorageLine(
                        nbytes=e.nbytes, dtype=e.dtype,
                        shape=tuple(e.shapes[0]) if e.shapes else (), role=e.role,
                        holder=names.get(e.key) or e.name or unnamed, body=self._is_body(e.key))
                        for e in top]
                del taken, mine
        except Exception as err:  # noqa: BLE001 - a census failure never fails the op
            self._notes.append(f"census failed: {type(err).__name__}: {err}")
        finally:
            self._busy = False
