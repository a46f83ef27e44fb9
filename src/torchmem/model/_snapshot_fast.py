"""Fast path of :mod:`torchmem.model.snapshot_pickle`: a whole trace entry per regex match.

After the first few entries of a snapshot, every trace entry PyTorch writes has one shape:
an empty dict stored in the memo, a mark, then ``key value`` pairs where each key is a
reference to a string stored earlier (``BINGET``/``LONG_BINGET``), each value is such a
reference (the action), an integer opcode (address, size, stream, time) or the list of
frames (itself references to frame dicts stored earlier), and ``SETITEMS``.

A generic regular expression (:data:`ENTRY`) recognises that shape and tells the order of
the keys (the *layout*; PyTorch writes one for ``oom`` entries and one for the others).
Each layout is compiled once into a specialised regex whose key references are literal
bytes and whose values have the pattern of their key's type; a run of entries is then
decoded from the match groups with a few cached dict lookups per entry. The regexes are
anchored and go opcode by opcode, so a match parses exactly as the general interpreter
would. Anything else (a string written inline, a frame seen for the first time, a
``FRAME`` header in the middle of an entry, a reference to something other than a
frame) makes the match or its check fail, and the general interpreter reads that entry
instead, with the same result.
"""

from __future__ import annotations

import re
import struct
from typing import Any

__all__ = ["FastPath", "CONSUMED", "ENTRY"]


class _Consumed:
    def __repr__(self) -> str:
        return "<trace entry handed to its sink>"


#: The memo's stand-in for a trace entry already handed to its sink.
CONSUMED = _Consumed()

_GET = rb"h.|j...."
_PUT = rb"\x94|q.|r...."
# integers of up to 8 bytes: all of int64 (PyTorch writes no other); the rest are slow
_LONG1 = b"|".join(b"\\x8a\\x%02x" % n + b"." * n for n in range(1, 9))
_INT = rb"K.|M..|J....|" + _LONG1
_SCALAR = _GET + rb"|" + _INT + rb"|N|\x88|\x89|G........"
_LIST = rb"\](?:" + _PUT + rb")(?:\((?:" + _GET + rb")+e|(?:" + _GET + rb")a)?"
_PAIR = rb"(" + _GET + rb")(?:" + _SCALAR + b"|" + _LIST + rb")"
#: Most keys of an entry the fast path reads (PyTorch writes 6 to 8).
MAX_PAIRS = 12


def _entry_pattern() -> re.Pattern[bytes]:
    tail = b""
    for _ in range(MAX_PAIRS - 1):
        tail = b"(?:" + _PAIR + tail + b")?"
    return re.compile(rb"\}(?:" + _PUT + rb")\(" + _PAIR + tail + b"u", re.DOTALL)


#: One trace entry in its common shape; its groups are the key references, in order.
ENTRY = _entry_pattern()

_STRUCTS: dict[int, struct.Struct] = {}
#: Most cached decodings kept before a cache is emptied (bounds their memory).
_CACHE_LIMIT = 100_000
_INT64 = 1 << 63
#: Most entry layouts (orders of keys) compiled.
_LAYOUT_LIMIT = 16
#: keys whose value is an integer, and the argument of ``TraceSink.add`` each fills
_INT_ROLES = {"addr": 1, "device_free": 1, "size": 2, "stream": 3, "time_us": 4}


class _Layout:
    """A compiled regex for one order of keys: the key references are literal, and each
    value has the pattern of its key's type (one capture group per value used)."""

    def __init__(self, keys: tuple[bytes, ...], names: tuple[str, ...]) -> None:
        parts = [rb"\}(" + _PUT + rb")\("]
        # index in ``groups()`` of: action, addr, size, stream, time_us, frames (0: none;
        # group 0 is the dict's memo store)
        roles = [0, 0, 0, 0, 0, 0]
        group = 0
        for raw, name in zip(keys, names):
            parts.append(re.escape(raw))
            if name == "action":
                group += 1
                roles[0] = group
                parts.append(b"(" + _GET + b")")
            elif name in _INT_ROLES:
                group += 1
                roles[_INT_ROLES[name]] = group
                parts.append(b"(" + _INT + b")")
            elif name == "frames":
                group += 1
                roles[5] = group
                parts.append(b"(" + _LIST + b"|" + _GET + b")")
            else:
                parts.append(b"(?:" + _SCALAR + b")")
        parts.append(b"u")
        self.match = re.compile(b"".join(parts), re.DOTALL).match
        self.roles = tuple(roles)


class FastPath:
    """Decodes runs of trace entries for one reader (see the module docstring)."""

    #: bytes that must be buffered after a ``}`` before the regex is tried there
    lookahead = 1 << 16

    def __init__(self, reader: Any) -> None:
        from torchmem.model.snapshot_pickle import RawFrame

        self.reader = reader
        self.frame_type = RawFrame
        self.layouts: dict[tuple[bytes | None, ...], _Layout | None] = {}
        self.layout: _Layout | None = None
        self.gets: dict[bytes, Any] = {}
        self.ints: dict[bytes, int] = {}
        self.stacks: dict[bytes, tuple[Any, ...]] = {}
        # the bytes of a whole frames list stored with MEMOIZE -> (stack, b"\x94")
        self.lists: dict[bytes, tuple[tuple[Any, ...], bytes]] = {}
        self.owner_id = -1
        self.sink: Any = None

    def forget(self) -> None:
        """Drop cached decodings (a memo slot was stored twice)."""
        self.layouts.clear()
        self.layout = None
        self.gets.clear()
        self.stacks.clear()
        self.lists.clear()

    def entries(self, buf: bytes, pos: int, owner: list[Any]) -> int:
        """Consume the trace entries that start at ``pos``; return where they end."""
        reader = self.reader
        memo_append = reader.memo.append
        sparse = reader.sparse
        add = self.sink.add if id(owner) == self.owner_id else None
        limit = len(buf) if reader.inp.eof else len(buf) - self.lookahead
        layout = self.layout
        match = layout.match if layout is not None else None
        ia, iaddr, isize, istream, itime, iframes = layout.roles if layout else (0,) * 6
        gets, ints, lists = self.gets, self.ints, self.lists
        from_bytes = int.from_bytes
        while pos < limit and buf[pos] == 0x7D:
            m = match(buf, pos) if match is not None else None
            if m is None:
                layout = self._learn(buf, pos)
                if layout is None:
                    break
                m = layout.match(buf, pos)
                if m is None:  # pragma: no cover - the generic regex matched these bytes
                    break
                match = layout.match
                ia, iaddr, isize, istream, itime, iframes = layout.roles
            g = m.groups()
            action = gets.get(g[ia])
            if action is None:
                action = self._get(g[ia])
                if type(action) is not str:
                    break
                gets[g[ia]] = action
            frames: Any = None
            put = None
            if iframes:
                raw = g[iframes]
                known = lists.get(raw)
                if known is not None:
                    frames, put = known
                elif raw[0] == 0x5D:
                    frames, put = self._frames(raw)
                else:
                    frames = self._get(raw)
                if type(frames) is not tuple:
                    break
            addr = size = stream = time_us = None
            if iaddr:
                addr = ints.get(g[iaddr])
                if addr is None:
                    addr = self._cached_int(g[iaddr])
                    if addr is None:
                        break
            if isize:
                size = ints.get(g[isize])
                if size is None:
                    size = self._cached_int(g[isize])
                    if size is None:
                        break
            if istream:  # at most 8 bytes (see _LONG1): within int64
                raw = g[istream]
                stream = 0 if raw == b"K\x00" else _int(raw)
            if itime:
                raw = g[itime]
                time_us = from_bytes(raw[2:], "little", signed=True) if raw[0] == 0x8A \
                    else _int(raw)
            # the dict, then its frames list, were stored in the memo in this order
            if sparse or g[0] != b"\x94":
                self._store(g[0], CONSUMED)
            else:
                memo_append(CONSUMED)
            if put is not None:
                if sparse or put != b"\x94":
                    self._store(put, frames)
                else:
                    memo_append(frames)
            if add is None:
                self.sink = reader.sink_of(owner)
                self.owner_id, add = id(owner), self.sink.add
            add(action, addr, size, stream, time_us, frames)
            pos = m.end()
        self.layout = layout
        return pos

    def _cached_int(self, raw: bytes) -> int | None:
        """An address or size (None when out of ``[0, 2**63)``: the general interpreter
        refuses the entry with its reason)."""
        value = _int(raw)
        if not 0 <= value < _INT64:
            return None
        if len(self.ints) >= _CACHE_LIMIT:
            self.ints.clear()
        self.ints[raw] = value
        return value

    def _learn(self, buf: bytes, pos: int) -> _Layout | None:
        """The layout of the entry at ``pos`` (compiled on first sight), or None."""
        m = ENTRY.match(buf, pos)
        if m is None:
            return None
        keys = m.groups()
        if keys in self.layouts:
            return self.layouts[keys]
        if len(self.layouts) >= _LAYOUT_LIMIT:
            return None
        memo = self.reader.memo
        names = []
        for raw in keys:
            if raw is None:
                break
            idx = raw[1] if raw[0] == 0x68 else int.from_bytes(raw[1:5], "little")
            if idx >= len(memo) or type(memo[idx]) is not str:
                return None
            names.append(memo[idx])
        ok = "action" in names and len(set(names)) == len(names)
        layout = _Layout(keys[:len(names)], tuple(names)) if ok else None  # type: ignore[arg-type]
        self.layouts[keys] = layout
        return layout

    def _get(self, raw: bytes) -> Any:
        """The string or stack a ``BINGET``/``LONG_BINGET`` refers to (None otherwise)."""
        memo = self.reader.memo
        idx = raw[1] if raw[0] == 0x68 else int.from_bytes(raw[1:5], "little")
        if idx >= len(memo):
            return None
        value = memo[idx]
        return value if type(value) in (str, tuple) else None

    def _frames(self, raw: bytes) -> tuple[tuple[Any, ...] | None, bytes]:
        """``]`` PUT [``(`` gets ``e`` | get ``a``] -> (interned stack, the PUT bytes)."""
        c = raw[1]
        cut = 2 if c == 0x94 else 3 if c == 0x71 else 6
        put, rest = raw[1:cut], raw[cut:]
        gets = (rest[1:-1] if rest[0] == 0x28 else rest[:-1]) if rest else b""
        stack = self.stacks.get(gets)  # the same references: the same stack
        if stack is None:
            memo = self.reader.memo
            frames = []
            for i in _indices(gets):
                if i >= len(memo) or type(memo[i]) is not self.frame_type:
                    return None, put
                frames.append(memo[i])
            as_tuple = tuple(frames)
            stack = self.reader.stacks.setdefault(as_tuple, as_tuple)
            if len(self.stacks) >= _CACHE_LIMIT:
                self.stacks.clear()
            self.stacks[gets] = stack
        if put == b"\x94":
            if len(self.lists) >= _CACHE_LIMIT:
                self.lists.clear()
            self.lists[raw] = (stack, put)
        return stack, put

    def _store(self, put: bytes, value: Any) -> None:
        reader = self.reader
        c = put[0]
        if c == 0x94:
            reader.put(len(reader.memo) + len(reader.sparse), value)
        else:
            reader.put(put[1] if c == 0x71 else int.from_bytes(put[1:5], "little"), value)


def _int(raw: bytes) -> int:
    c = raw[0]
    if c == 0x8A:
        return int.from_bytes(raw[2:], "little", signed=True)
    if c == 0x4B:
        return raw[1]
    if c == 0x4D:
        return raw[1] | raw[2] << 8
    return int.from_bytes(raw[1:5], "little", signed=True)


def _indices(gets: bytes) -> tuple[int, ...]:
    """Memo indices of a run of ``BINGET``/``LONG_BINGET`` opcodes."""
    n = len(gets) // 5
    if len(gets) == 5 * n and gets[::5] == b"j" * n:
        unpack = _STRUCTS.get(n)
        if unpack is None:
            unpack = _STRUCTS[n] = struct.Struct("<" + "xI" * n)
        return unpack.unpack(gets)  # type: ignore[no-any-return]
    if not len(gets) % 2 and gets[::2] == b"h" * (len(gets) // 2):
        return tuple(gets[1::2])
    out = []
    i = 0
    while i < len(gets):
        if gets[i] == 0x68:
            out.append(gets[i + 1])
            i += 2
        else:
            out.append(int.from_bytes(gets[i + 1:i + 5], "little"))
            i += 5
    return tuple(out)
