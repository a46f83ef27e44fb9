"""A CUDA memory snapshot's allocation trace as a per-line window (no torch).

``torch.cuda.memory._record_memory_history(stacks="python")`` makes the caching
allocator record every action with the Python stack that caused it, and
``torch.cuda.memory._snapshot()`` returns them (the documented ``Snapshot`` format:
``segments`` with their ``blocks``, and ``device_traces``, one list of ``TraceEntry``
per device: ``action``, ``addr``, ``size``, ``frames`` innermost first). This module
turns the trace of one profiled step into a
:class:`~torchmem.analyze.line_windows.WindowTally`: each ``alloc`` is charged to the
line of its innermost user frame (an allocation with no user frame, as those of the
autograd thread during ``backward()``, to the user line that ran last before it: the
line that started the backward, as the CPU engine charges it), each ``free_completed``
to the line that allocated
that block if the allocation is in the same trace or among the blocks the previous,
contiguous window left alive (else it is unattributed: made before profiling, or in a
step that was not profiled). The tally then gives the same per-line sums and
peak composition as the CPU engine's.

Cost: linear in the trace entries.

Known limitations:
    * The trace is a ring buffer of ``max_entries``: when it wrapped, the oldest
      actions of the step are missing (:func:`window_from_trace` reports it, and the
      per-line sums no longer add up to the measured delta).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, Sequence

from torchmem.analyze.line_windows import Site, WindowTally

__all__ = ["frame_site", "stacks_by_address", "window_from_trace", "TraceWindow", "USED_ACTIONS"]

#: actions that change the bytes in use (``memory_allocated``)
USED_ACTIONS = ("alloc", "free_completed")

#: one frame of a stack as ``(file, line, function, user)``
StackFrameTuple = tuple[str, int, str, bool]


def _frame(f: Mapping[str, Any], is_user: Callable[[str], bool]) -> StackFrameTuple | None:
    try:
        filename, line, name = str(f["filename"]), int(f["line"]), str(f.get("name", ""))
    except (KeyError, TypeError, ValueError):
        return None
    return filename, max(line, 0), name, bool(is_user(filename))


def _python(frame: StackFrameTuple) -> bool:
    return frame[0].endswith(".py") or frame[0].startswith("<")


def frame_site(frames: Sequence[Mapping[str, Any]], is_user: Callable[[str], bool],
               all_files: bool = False, fallback: bool = True,
               ) -> tuple[Site | None, tuple[StackFrameTuple, ...]]:
    """The site of a trace entry's frames (innermost user frame, or with ``all_files``
    the innermost Python frame not in torchmem) and the whole stack as tuples; with
    ``fallback``, a stack with no such frame gets its innermost Python frame (else
    ``None``)."""
    stack = tuple(x for x in (_frame(f, is_user) for f in frames or ()) if x is not None)
    site: Site | None = None
    for file, line, name, user in stack:
        if "torchmem" in file.replace("\\", "/").split("/"):
            continue
        if user or (all_files and _python((file, line, name, user))):
            site = (file, line, name)
            break
    if site is None and fallback:
        for file, line, name, _ in stack:
            if _python((file, line, name, False)):
                site = (file, line, name)
                break
    return site, stack


class TraceWindow:
    """The result of :func:`window_from_trace`.

    Attributes:
        tally: the per-line window; its event tokens are the blocks, each a tuple
            ``(addr, bytes, site, stack)`` (one per allocation).
        alive: the blocks allocated in the window and alive at its end.
        wrapped: the per-line sums do not add up to the measured delta (the trace's
            ring buffer wrapped, or the recording started late).
    """

    def __init__(self, tally: WindowTally, alive: list[Block], wrapped: bool) -> None:
        self.tally = tally
        self.alive = alive
        self.wrapped = wrapped


#: one allocation of a trace: ``(addr, bytes, site, stack)``
Block = tuple[int, int, "Site | None", tuple[StackFrameTuple, ...]]


def window_from_trace(trace: Sequence[Mapping[str, Any]], *, step: int, device: str,
                      start_allocated: int, is_user: Callable[[str], bool],
                      all_files: bool = False, measured_delta: int | None = None,
                      known: Mapping[int, Block] | None = None) -> TraceWindow:
    """Build the per-line window of one device's trace (``snapshot['device_traces'][i]``).

    Args:
        trace: the device's trace entries, oldest first, recorded during the window.
        step: the step of the window.
        device: ``cuda:N``.
        start_allocated: ``memory_allocated`` when the recording began.
        is_user: decides whether a file name is the user's code.
        all_files: attribute to library lines too.
        measured_delta: ``memory_allocated`` at the end minus at the start, if known.
        known: the blocks alive at the end of the previous window when it ended right
            where this one begins (address -> block): their frees here are charged to
            the lines that made them.
    """
    tally = WindowTally(step, device)
    known = dict(known or {})
    known_bytes: dict[Site | None, int] = {}
    for old in known.values():
        known_bytes[old[2]] = known_bytes.get(old[2], 0) + old[1]
    rest = max(int(start_allocated) - sum(known_bytes.values()), 0)
    tally.start_live = dict(known_bytes)
    tally.start_live[None] = tally.start_live.get(None, 0) + rest
    tally.start_tokens = {id(b): (b, b[2], b[1]) for b in known.values()}
    tally.measured_delta = measured_delta
    live: dict[int, Block] = {}
    running: Site | None = None  # the user's line that ran last
    for entry in trace:
        action = entry.get("action")
        if action not in USED_ACTIONS:
            continue
        try:
            addr, size = int(entry["addr"]), int(entry["size"])
        except (KeyError, TypeError, ValueError):
            continue
        if action == "alloc":
            site, stack = frame_site(entry.get("frames") or (), is_user, all_files,
                                     fallback=False)
            if site is None:
                # no frame of the user's code: torch's autograd thread running the
                # backward that the user's last line started (as the CPU engine charges it)
                site = running
            else:
                running = site
            block: Block = (addr, size, site, stack)
            live[addr] = block
            tally.add(site, size, block)
        else:
            born = live.pop(addr, None)
            if born is not None:
                tally.remove(born[2], size, born, own=True)
                continue
            older = known.pop(addr, None)
            if older is not None and older[1] == size:
                tally.remove(older[2], size, older, own=False)
            else:
                tally.remove(None, size, (addr, size, None, ()), own=False)
    wrapped = measured_delta is not None and tally.attributed_delta != measured_delta
    return TraceWindow(tally, list(live.values()), wrapped)


def stacks_by_address(segments: Iterable[Any], is_user: Callable[[str], bool],
                      all_files: bool = False) -> dict[int, tuple[StackFrameTuple, ...]]:
    """``block address -> allocating stack`` of the blocks in use in a snapshot's
    ``segments`` that carry frames (allocated while the allocator's history recorded
    them). A block's address is its ``address`` or, in older formats, its segment's
    address plus the sizes of the blocks before it. Malformed entries are skipped."""
    out: dict[int, tuple[StackFrameTuple, ...]] = {}
    for seg in segments:
        blocks = seg.get("blocks") if isinstance(seg, Mapping) else None
        if not isinstance(blocks, list):
            continue
        base = seg.get("address")
        offset = 0
        for b in blocks:
            if not isinstance(b, Mapping):
                continue
            size, addr = b.get("size"), b.get("address")
            if type(addr) is not int:
                addr = base + offset if type(base) is int else None
            offset += size if type(size) is int else 0
            frames = b.get("frames")
            history = b.get("history")
            if not frames and isinstance(history, list) and history and isinstance(
                    history[0], Mapping):
                frames = history[0].get("frames")
            if addr is None or b.get("state") != "active_allocated" or not frames:
                continue
            _, stack = frame_site(frames, is_user, all_files)
            if stack:
                out[addr] = stack
    return out

