"""Host memory figures: process RSS and bytes in use in the C heap.

* :func:`rss_bytes` -- resident set size from ``/proc/self/statm`` (elsewhere
  ``psutil``, else ``resource``). It counts every resident page of the process:
  tensors, Python objects, shared libraries, CUDA/driver mappings. It lags frees
  (glibc keeps freed memory until trimmed) and counts pages only once touched.
  Cost: about 2-4 us (one ``pread`` of ``/proc/self/statm`` on a kept descriptor).
* :func:`heap_bytes` -- glibc ``mallinfo2()``: ``uordblks + hblkhd``, the bytes handed
  out by ``malloc`` and not yet freed, mmapped chunks included. CPU tensor storages are
  allocated with ``posix_memalign`` by c10's CPU allocator, so every CPU tensor is in
  this figure the moment it is allocated and leaves it the moment it is freed. It also
  holds other C/C++ allocations (torch internals, numpy buffers, libraries); Python's
  small objects live in pymalloc arenas, which are mmapped outside malloc and are not
  counted. Cost: a few microseconds (glibc walks the free lists of every arena under
  its lock). ``None`` off glibc or on glibc < 2.33 (no ``mallinfo2``).

This module does not import torch.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from typing import Any, Callable

__all__ = ["rss_bytes", "heap_bytes", "heap_available", "trim_heap"]


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd",
            "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost",
        )
    ]


_mallinfo2: Callable[[], _MallInfo2] | None = None
_malloc_trim: Callable[[int], int] | None = None
_loaded = False


def _load() -> None:
    global _mallinfo2, _malloc_trim, _loaded
    _loaded = True
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return
    fn = getattr(libc, "mallinfo2", None)
    if fn is not None:
        fn.restype = _MallInfo2
        fn.argtypes = []
        _mallinfo2 = fn
    trim = getattr(libc, "malloc_trim", None)
    if trim is not None:
        trim.restype = ctypes.c_int
        trim.argtypes = [ctypes.c_size_t]
        _malloc_trim = trim


def heap_available() -> bool:
    """True when :func:`heap_bytes` can measure (Linux with glibc >= 2.33)."""
    if not _loaded:
        _load()
    return _mallinfo2 is not None


def heap_bytes() -> int | None:
    """Bytes currently allocated through ``malloc`` (glibc ``mallinfo2``), or ``None``.

    Returns:
        ``uordblks + hblkhd``: in-use bytes of all arenas plus mmapped chunks, or
        ``None`` when the C library has no ``mallinfo2``.

    Example:
        >>> before = heap_bytes()                       # doctest: +SKIP
        >>> x = torch.empty(1024, 1024)                 # doctest: +SKIP
        >>> heap_bytes() - before >= 4 * 1024 * 1024   # doctest: +SKIP
        True
    """
    if not _loaded:
        _load()
    if _mallinfo2 is None:
        return None
    info = _mallinfo2()
    return int(info.uordblks + info.hblkhd)


def trim_heap() -> bool:
    """Ask glibc to give free heap memory back to the OS (``malloc_trim(0)``).

    This lowers RSS after large frees; it does not change :func:`heap_bytes`.

    Returns:
        True when memory was released, False when nothing was or no glibc.
    """
    if not _loaded:
        _load()
    if _malloc_trim is None:
        return False
    return bool(_malloc_trim(0))


_process: Any = None
_statm_fd = -1
_owner_pid = -1
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _statm_rss() -> int | None:
    global _statm_fd, _owner_pid
    pid = os.getpid()
    if _owner_pid != pid:  # first call, or after fork: /proc/self moved on
        _owner_pid = pid
        try:
            _statm_fd = os.open("/proc/self/statm", os.O_RDONLY)
        except OSError:
            _statm_fd = -1
    if _statm_fd < 0:
        return None
    try:
        return int(os.pread(_statm_fd, 128, 0).split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


def rss_bytes() -> int:
    """Resident set size of this process, in bytes.

    Reads ``/proc/self/statm`` through a file descriptor kept open (about 2-4 us);
    elsewhere uses ``psutil``, else the peak RSS from ``resource.getrusage`` (an upper
    bound, the only figure some platforms give).
    """
    rss = _statm_rss()
    if rss is not None:
        return rss
    global _process
    if _process is None:
        try:
            import psutil

            _process = psutil.Process()
        except Exception:  # noqa: BLE001 - psutil missing or broken: fall back
            _process = False
    if _process:
        try:
            return int(_process.memory_info().rss)
        except Exception:  # noqa: BLE001
            pass
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)
