"""The final segments of a CUDA snapshot, and whose frames are the script's (pure; no torch).

:func:`segment_state` sums a device's segments and blocks the way the caching allocator's
own statistics do (``torch.cuda.memory_stats``), so :func:`torchmem.analyze.fragmentation
.judge` can give the same verdict on a snapshot as on a live process:

* ``reserved``: bytes of all segments;
* ``allocated``: bytes of ``active_allocated`` blocks (the allocator's rounded sizes), and
  ``requested``: what the tensors asked for (the sizes the trace counts);
* ``active``: allocated blocks plus those freed but still in use by a stream
  (``active_pending_free``);
* ``inactive_split``: free blocks inside segments split into several blocks (what
  ``empty_cache()`` cannot return), and ``releasable``: segments wholly free.

:func:`split_frames` puts the script's frames first: a Python frame outside torch,
site-packages, dist-packages and the standard library is the user's; C++ frames (no
``.py`` file) are counted, not listed. Values of the wrong type in a (possibly hostile)
file count as zero; they are never trusted as numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from torchmem.model.snapshot import Frame

__all__ = ["SegmentState", "segment_state", "split_frames", "is_user_frame", "as_stats"]

_LIBRARY = ("/site-packages/", "/dist-packages/", "/torch/", "/lib/python", "<frozen ")
#: Most user frames listed per stack, and most library frames.
MAX_USER_FRAMES = 8
MAX_LIBRARY_FRAMES = 3


@dataclass
class SegmentState:
    """Sums over one device's final segments (see the module docstring)."""

    segments: int = 0
    blocks: int = 0
    reserved: int = 0
    allocated: int = 0
    requested: int = 0
    active: int = 0
    inactive_split: int = 0
    releasable: int = 0
    largest_free: int = 0
    split_segments: int = 0
    malformed: int = 0
    live: list[tuple[int, int, tuple[Any, ...]]] = field(default_factory=list)  # addr, req, frames


def _int(value: Any) -> int:
    """A size or address from the file; 0 unless an integer in ``[0, 2**48)`` (256 TiB:
    beyond any device), so that sums stay within 64 bits."""
    return value if type(value) is int and 0 <= value < 1 << 48 else 0


def segment_state(segments: Iterable[Any]) -> SegmentState:
    """Sum the segments of one device (dicts as the snapshot stores them)."""
    s = SegmentState()
    for seg in segments:
        blocks = seg.get("blocks") if type(seg) is dict else None
        if type(blocks) is not list:
            s.malformed += 1
            continue
        s.segments += 1
        total = _int(seg.get("total_size"))
        s.reserved += total
        address = _int(seg.get("address"))
        offset = 0
        free_here = 0
        kinds = 0
        for b in blocks:
            if type(b) is not dict:
                s.malformed += 1
                continue
            s.blocks += 1
            size = _int(b.get("size"))
            state = b.get("state")
            frames, requested = b.get("frames"), b.get("requested_size")
            history = b.get("history")
            if frames is None and type(history) is list and history and type(history[0]) is dict:
                frames, requested = history[0].get("frames"), history[0].get("real_size")
            addr = _int(b.get("address")) or address + offset
            offset += size
            if state == "active_allocated":
                s.allocated += size
                s.active += size
                req = _int(requested) or size
                s.requested += req
                s.live.append((addr, req, frames if type(frames) is tuple else ()))
                kinds |= 1
            elif state in ("active_pending_free", "active_awaiting_free"):
                s.active += size
                kinds |= 1
            else:
                free_here += size
                s.largest_free = max(s.largest_free, size)
                kinds |= 2
        if kinds == 3:  # free pieces beside blocks in use: split, not returnable
            s.inactive_split += free_here
            s.split_segments += 1
        elif kinds == 2:
            s.releasable += total or free_here
    return s


def as_stats(state: SegmentState, ooms: int, retries: int) -> dict[str, int]:
    """The ``torch.cuda.memory_stats()`` keys :func:`~torchmem.analyze.fragmentation.judge`
    reads, from the final segments and the trace."""
    return {"allocated_bytes.all.current": state.allocated,
            "reserved_bytes.all.current": state.reserved,
            "active_bytes.all.current": state.active,
            "inactive_split_bytes.all.current": state.inactive_split,
            "num_ooms": ooms, "num_alloc_retries": retries}


def is_python_frame(filename: str) -> bool:
    return filename.endswith(".py") or filename.startswith("<")


def is_user_frame(filename: str) -> bool:
    """Whether a frame's file is the script's (not torch, a package, the stdlib or C++)."""
    if not is_python_frame(filename):
        return False
    path = filename.replace("\\", "/")
    return not any(part in path for part in _LIBRARY)


def split_frames(frames: Iterable[Any]) -> tuple[tuple[Frame, ...], tuple[Frame, ...], int]:
    """(user frames, innermost library Python frames, count of C++ frames) of a stack
    given innermost first as ``(filename, line, name)`` triples."""
    user: list[Frame] = []
    library: list[Frame] = []
    cpp = 0
    for filename, line, name in frames:
        if not is_python_frame(filename):
            cpp += 1
        elif is_user_frame(filename):
            if len(user) < MAX_USER_FRAMES:
                user.append(Frame(filename, line, name))
        elif len(library) < MAX_LIBRARY_FRAMES and not user:
            library.append(Frame(filename, line, name))
    return tuple(user), tuple(library), cpp
