"""Read a CUDA memory snapshot pickle without unpickling it: no import, no call, no torch.

``torch.cuda.memory._dump_snapshot`` writes ``pickle.dump(torch.cuda.memory._snapshot())``:
a dict of plain data (``segments`` with their ``blocks``, ``device_traces`` with one list
of trace entries per device, ``allocator_settings``...). This module reads that file with
its own small interpreter of the pickle opcodes instead of :mod:`pickle`:

* **Nothing runs.** Only the opcodes that build dicts, lists, tuples, strings, numbers,
  booleans and ``None`` are understood. An opcode that imports a name or calls one
  (``GLOBAL``, ``STACK_GLOBAL``, ``REDUCE``, ``BUILD``, ``INST``, ``OBJ``, ``NEWOBJ``,
  extension codes, persistent ids) or builds a type the format never uses (bytes, sets,
  out-of-band buffers) is refused with :class:`SnapshotError`, naming the opcode and its
  offset. A hostile pickle is data to this reader, never code.
* **Streaming, in bounded memory.** The file is read in chunks. Each trace entry is handed
  to a :class:`TraceSink` as soon as it is complete and then dropped; stack traces are kept
  once (a frame ``(filename, line, name)`` and a whole stack are interned), so memory
  follows the number of distinct stacks and live allocations, not the file size.
* **Fast.** The common shape of a trace entry (a flat dict whose keys, action and frames
  are references to objects stored earlier) is parsed by one regular expression per
  entry (:mod:`torchmem.model._snapshot_fast`); anything else goes through the general
  interpreter, which gives the same result.

Cost (``benchmarks/snapshot_import.py``): about 3 µs of CPU per trace entry, plus about
1 µs per opcode of what the fast path does not cover (segments, first occurrences of
frames); a 1 GiB snapshot of 6.8 million entries is read and analysed in about 29 s of
CPU on a slow shared 2-CPU machine. Memory: the interned frames and stacks, 8 bytes per
stored object reference (the pickle memo), and what the sinks keep: a peak RSS of 0.13x
the file size there, where ``pickle.load`` takes 4.1x.

Known limitations:
    * A trace entry with more than 1000 keys (never written by PyTorch) is handed to its
      sink after its first 1000 keys.
    * ``pickle`` protocol 0 and 1 files are read by the general interpreter only (about
      10x slower than protocol 2+ files, which is what PyTorch writes).
"""

from __future__ import annotations

import codecs
import os
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Protocol

from torchmem.errors import CaptureError
from torchmem.model import _snapshot_fast as fast

__all__ = ["SnapshotError", "RawFrame", "TraceSink", "SnapshotData", "read_snapshot",
           "MAX_SNAPSHOT_BYTES", "looks_like_pickle"]

#: Largest snapshot file read (PyTorch warns that snapshots reach several GB).
MAX_SNAPSHOT_BYTES = 64 * 1024**3
#: Bytes read from the file at a time.
CHUNK = 8 * 1024 * 1024
#: Most values on the pickle stack between two marks (CPython batches 1000 items).
MAX_STACK = 100_000
#: Deepest nesting of marks (a real snapshot nests 7 deep).
MAX_MARKS = 1000
#: Longest argument line of a text opcode (protocol 0).
MAX_LINE = 1 << 20
#: Longest integer opcode argument in bytes (the format's integers fit in 9).
MAX_LONG = 64
#: Highest pickle protocol understood (Python 3.8+ writes 5 at most).
HIGHEST_PROTOCOL = 5


class SnapshotError(CaptureError):
    """A CUDA snapshot file is refused: not a pickle, truncated, hostile, or not a snapshot."""


class RawFrame(NamedTuple):
    """One frame of a recorded stack, as the snapshot stores it (innermost first)."""

    filename: str
    line: int
    name: str


class TraceSink(Protocol):
    """Receives the trace entries of one device, in order, as soon as each is read."""

    def add(self, action: str, addr: int | None, size: int | None, stream: int | None,
            time_us: int | None, frames: tuple[RawFrame, ...] | None) -> None:
        """One entry. ``addr`` is ``device_free`` for an ``oom`` entry; a key the entry
        does not have is None; ``frames`` is an interned tuple, innermost frame first."""


@dataclass
class SnapshotData:
    """What :func:`read_snapshot` returns.

    Attributes:
        top: the snapshot dict; ``segments`` as plain dicts (their ``frames`` as tuples of
            :class:`RawFrame`), each ``device_traces`` list emptied (its entries went to
            its sink).
        sinks: one sink per device trace (``None`` for a device without entries).
        file_bytes: size of the file.
        protocol: the pickle protocol of the file (0 when it declares none).
    """

    top: dict[str, Any]
    sinks: list[TraceSink | None]
    file_bytes: int
    protocol: int


_CONSUMED = fast.CONSUMED
_INT64 = 1 << 63
_UNKNOWN_FRAME = RawFrame("<unknown>", 0, "<unknown>")

# opcodes refused, with what they would do
_REFUSED = {
    ord("c"): "GLOBAL (imports a name)", 0x93: "STACK_GLOBAL (imports a name)",
    ord("R"): "REDUCE (calls a function)", ord("b"): "BUILD (sets an object's state)",
    ord("i"): "INST (imports and calls a class)", ord("o"): "OBJ (calls a class)",
    0x81: "NEWOBJ (calls a class)", 0x92: "NEWOBJ_EX (calls a class)",
    0x82: "EXT1 (imports a registered name)", 0x83: "EXT2 (imports a registered name)",
    0x84: "EXT4 (imports a registered name)", ord("P"): "PERSID (a persistent id)",
    ord("Q"): "BINPERSID (a persistent id)", ord("S"): "STRING (a Python 2 string)",
    ord("T"): "BINSTRING (a Python 2 string)", ord("U"): "SHORT_BINSTRING (a Python 2 string)",
    ord("B"): "BINBYTES (bytes)", ord("C"): "SHORT_BINBYTES (bytes)", 0x8E: "BINBYTES8 (bytes)",
    0x96: "BYTEARRAY8 (a bytearray)", 0x97: "NEXT_BUFFER (an out-of-band buffer)",
    0x98: "READONLY_BUFFER (an out-of-band buffer)", 0x8F: "EMPTY_SET (a set)",
    0x90: "ADDITEMS (a set)", 0x91: "FROZENSET (a frozenset)",
}


def looks_like_pickle(head: bytes) -> bool:
    """Whether the first bytes of a file look like a pickle rather than JSON text.

    Protocol 2+ pickles start with ``PROTO`` (``0x80``); protocol 0/1 snapshots with a
    dict (``(dp0`` or ``}``). JSON starts with ``{``, ``[`` or whitespace.
    """
    return head[:1] == b"\x80" or head[:3] == b"(dp" or head[:2] in (b"}q", b"}r")


class _Input:
    """The file, read in chunks: ``buf`` holds the unread part from ``pos`` on."""

    def __init__(self, fh: Any, size: int, chunk: int) -> None:
        self.fh, self.size, self.chunk = fh, size, chunk
        self.offset = 0  # file offset of buf[0]
        self.eof = False
        self.buf = b""

    def refill(self, buf: bytes, pos: int, need: int = 0) -> tuple[bytes, int]:
        """Keep ``buf[pos:]`` and read at least ``need`` more bytes if the file has them."""
        self.offset += pos
        rest = buf[pos:]
        want = max(self.chunk, need - len(rest))
        data = b"" if self.eof else self.fh.read(want)
        if len(data) < want:
            self.eof = True
        self.buf = rest + data if rest else data
        return self.buf, 0


class _Reader:
    """The opcode interpreter (one per file)."""

    def __init__(self, source: str, inp: _Input, sink_for: Callable[[], TraceSink]) -> None:
        self.source, self.inp, self.sink_for = source, inp, sink_for
        self.memo: list[Any] = []
        self.sparse: dict[int, Any] = {}  # memo indices far beyond the end (never in practice)
        self.slot: dict[int, int] = {}  # id(container) -> memo index, until compacted
        # id(trace list) -> (the list, kept alive so that its id stays its own; its sink)
        self.sinks: dict[int, tuple[list[Any], TraceSink]] = {}
        self.frames: dict[RawFrame, RawFrame] = {}
        self.stacks: dict[tuple[RawFrame, ...], tuple[RawFrame, ...]] = {}
        self.protocol = 0
        self.max_retained = max(1_000_000, inp.size // 32)
        self.fast = fast.FastPath(self)

    # -- errors ------------------------------------------------------------------------
    def refuse(self, what: str, at: int, tip: str | None = None) -> SnapshotError:
        return SnapshotError(f"{self.source}: refused: {what} (at byte {at})",
                             tip=tip or "pass a file written by "
                                        "torch.cuda.memory._dump_snapshot()")

    # -- memo --------------------------------------------------------------------------
    def get(self, idx: int, at: int) -> Any:
        if idx < len(self.memo):
            value = self.memo[idx]
        elif idx in self.sparse:
            value = self.sparse[idx]
        else:
            raise self.refuse(f"the pickle refers to stored object {idx}, which was never "
                              "stored", at)
        if value is _CONSUMED:
            raise self.refuse("the pickle refers to a trace entry from elsewhere; "
                              "PyTorch never writes that", at)
        return value

    def put(self, idx: int, value: Any) -> None:
        memo = self.memo
        if idx == len(memo):
            memo.append(value)
        elif idx < len(memo):
            old = memo[idx]
            if type(old) in (dict, list) and self.slot.get(id(old)) == idx:
                del self.slot[id(old)]
            memo[idx] = value
            self.fast.forget()  # cached references may now mean something else
        else:
            self.sparse[idx] = value
        if type(value) in (dict, list):
            self.slot[id(value)] = idx
            if len(self.slot) > self.max_retained:
                raise self.refuse(f"more than {self.max_retained} stored dicts and lists "
                                  "that are not trace entries or frames", self.inp.offset)

    def replace(self, old: Any, new: Any) -> None:
        """``old`` (a stored container) is now ``new`` for later references."""
        idx = self.slot.pop(id(old), None)
        if idx is not None:
            if idx < len(self.memo):
                self.memo[idx] = new
            else:
                self.sparse[idx] = new

    # -- compaction of frames and stacks ---------------------------------------------------
    def frame_of(self, item: Any) -> RawFrame:
        if type(item) is RawFrame:
            return item
        if type(item) is dict and "filename" in item:
            f = RawFrame(_text(item.get("filename")), _number(item.get("line")),
                         _text(item.get("name")))
            f = self.frames.setdefault(f, f)
            self.replace(item, f)
            return f
        return _UNKNOWN_FRAME

    def stack_of(self, value: Any) -> Any:
        """``frames`` value -> interned tuple of frames (a tuple stays, other types too)."""
        if type(value) is not list:
            return value
        frames = tuple(self.frame_of(item) for item in value)
        stack = self.stacks.setdefault(frames, frames)
        self.replace(value, stack)
        return stack

    def sink_of(self, owner: list[Any]) -> TraceSink:
        """The sink of the trace entries appended to ``owner`` (made on first use)."""
        known = self.sinks.get(id(owner))
        if known is None:
            known = self.sinks[id(owner)] = (owner, self.sink_for())
        return known[1]

    def consume(self, owner: list[Any], entry: dict[str, Any], at: int) -> None:
        """Hand a complete trace entry to the sink of its list and forget it."""
        idx = self.slot.pop(id(entry), None)
        if idx is not None:
            if idx < len(self.memo):
                self.memo[idx] = _CONSUMED
            else:
                self.sparse[idx] = _CONSUMED
        action = entry["action"]
        addr = entry.get("addr", entry.get("device_free"))
        size, stream, time_us = entry.get("size"), entry.get("stream"), entry.get("time_us")
        frames = entry.get("frames")
        if type(action) is not str:
            raise self.refuse(f"a trace entry whose action is {_describe(action)}, not a "
                              "string", at)
        for key, value in (("addr", addr), ("size", size), ("stream", stream),
                           ("time_us", time_us)):
            if value is not None and type(value) is not int:
                raise self.refuse(f"a trace entry whose {key} is {_describe(value)}, not "
                                  "an integer", at)
            if value is not None and not (0 if key in ("addr", "size") else -_INT64) \
                    <= value < _INT64:
                raise self.refuse(f"a trace entry whose {key} is {value}, out of the "
                                  "range of the allocator's 64-bit integers", at)
        if frames is not None and type(frames) is not tuple:
            raise self.refuse(f"a trace entry whose frames are {_describe(frames)}, not a "
                              "list of frames", at)
        self.sink_of(owner).add(action, addr, size, stream, time_us, frames)

    def run(self) -> Any:
        from torchmem.model._snapshot_vm import run

        return run(self)


def _text(value: Any) -> str:
    return value if type(value) is str else ("?" if value is None else str(value)[:200])


def _number(value: Any) -> int:
    return value if type(value) is int else 0


def read_snapshot(path: str | os.PathLike[str], sink_for: Callable[[], TraceSink], *,
                  max_bytes: int = MAX_SNAPSHOT_BYTES, chunk: int = CHUNK) -> SnapshotData:
    """Read a snapshot file written by ``torch.cuda.memory._dump_snapshot``.

    Args:
        path: the ``.pickle`` file.
        sink_for: called once per device trace list to make the sink of its entries.
        max_bytes: refuse larger files.
        chunk: bytes read at a time.

    Returns:
        The snapshot's dict (segments kept, trace entries handed to the sinks).

    Raises:
        SnapshotError: the file is missing, unreadable, empty, larger than ``max_bytes``,
            not a pickle, truncated, uses an opcode that would import or call code or
            build a type the format never uses, or is not a CUDA memory snapshot.
    """
    name = source = os.fspath(path)
    try:
        fh = open(source, "rb")
    except FileNotFoundError:
        raise SnapshotError(f"{name}: not found",
                            tip="pass a file written by torch.cuda.memory._dump_snapshot()"
                            ) from None
    except OSError as err:
        raise SnapshotError(f"{name}: cannot read it: {err.strerror or err}") from None
    with fh:
        try:
            size = os.fstat(fh.fileno()).st_size
        except OSError as err:  # pragma: no cover - fstat of an open file
            raise SnapshotError(f"{name}: cannot read it: {err.strerror or err}") from None
        if size > max_bytes:
            raise SnapshotError(f"{name}: refused: {size} bytes is more than the "
                                f"{max_bytes} bytes this reader accepts")
        inp = _Input(fh, size, chunk)
        reader = _Reader(name, inp, sink_for)
        try:
            top = reader.run()
        except OSError as err:
            raise SnapshotError(f"{name}: cannot read it: {err.strerror or err}") from None
        except MemoryError:
            raise SnapshotError(f"{name}: refused: out of memory while reading it") from None
        except RecursionError:  # pragma: no cover - the interpreter does not recurse
            raise SnapshotError(f"{name}: refused: nested too deeply") from None
    sinks = _check_top(name, top, reader)
    return SnapshotData(top=top, sinks=sinks, file_bytes=size, protocol=reader.protocol)


def _describe(value: Any) -> str:
    if type(value) is dict:
        keys = ", ".join(repr(k)[:40] for k in list(value)[:6])
        more = ", ..." if len(value) > 6 else ""
        return f"a dict with keys {keys}{more}" if value else "an empty dict"
    if type(value) is list:
        return f"a list of {len(value)} items"
    if type(value) is str:
        return repr(value[:40])
    return f"a {type(value).__name__}"


def _check_top(name: str, top: Any, reader: _Reader) -> list[TraceSink | None]:
    tip = "pass a file written by torch.cuda.memory._dump_snapshot()"
    if type(top) is not dict or "segments" not in top or "device_traces" not in top:
        hint = ""
        if type(top) is dict and "schema_version" in top and "tool" in top:
            hint = " (a torchmem capture; pass the JSON file itself)"
        raise SnapshotError(f"{name}: not a CUDA memory snapshot; expected a dict with "
                            f"'segments' and 'device_traces', got {_describe(top)}{hint}",
                            tip=tip)
    segments, traces = top["segments"], top["device_traces"]
    if type(segments) is not list:
        raise SnapshotError(f"{name}: not a CUDA memory snapshot; expected 'segments' to be "
                            f"a list, got {_describe(segments)}", tip=tip)
    if type(traces) is not list or any(type(t) is not list for t in traces):
        raise SnapshotError(f"{name}: not a CUDA memory snapshot; expected 'device_traces' "
                            "to be a list of lists of trace entries", tip=tip)
    sinks: list[TraceSink | None] = []
    for trace in traces:
        if any(type(e) is not dict for e in trace):
            raise SnapshotError(f"{name}: not a CUDA memory snapshot; a device trace holds "
                                "something other than trace entries", tip=tip)
        known = reader.sinks.get(id(trace))
        sinks.append(known[1] if known is not None and known[0] is trace else None)
    return sinks


# the codec used by protocol 0's UNICODE opcode
_RAW_UNICODE = codecs.getdecoder("raw_unicode_escape")
