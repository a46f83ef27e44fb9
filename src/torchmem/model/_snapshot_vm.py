"""The general pickle-opcode interpreter of :mod:`torchmem.model.snapshot_pickle`.

It understands the opcodes of protocols 0 to 5 that build plain data, and nothing else:
see :data:`~torchmem.model.snapshot_pickle._REFUSED` for what is refused. It never
recurses (nesting is a list of stacks, bounded by ``MAX_MARKS``), never reads past the
file (lengths are checked against what is left), and gives way to the fast path for
trace entries inside a list. Cost: about 1 µs per opcode.
"""

from __future__ import annotations

import struct
from typing import Any

from torchmem.model import snapshot_pickle as sp

_DOUBLE = struct.Struct(">d")
_GZIP = b"\x1f\x8b"


def _fail(r: Any, what: str, at: int) -> sp.SnapshotError:
    return r.refuse(what, at)


def run(r: Any) -> Any:
    """Interpret the file of reader ``r`` up to ``STOP``; return the top-level object."""
    inp = r.inp
    buf, pos = inp.refill(b"", 0)
    if not buf:
        raise sp.SnapshotError(f"{r.source}: not a pickle: the file is empty",
                               tip="pass a file written by torch.cuda.memory._dump_snapshot()")
    if buf[:2] == _GZIP:
        raise sp.SnapshotError(f"{r.source}: not a pickle: it is gzip-compressed",
                               tip=f"decompress it first: gunzip -k {r.source}")
    if not sp.looks_like_pickle(buf[:4]) and buf[0] not in sp._REFUSED \
            and buf[0] not in b"(}]":  # protocol 0/1 containers; refusals get their message
        what = "JSON text" if buf.lstrip()[:1] in (b"{", b"[") else \
            f"byte {buf[0]:#04x} ({chr(buf[0])!r})" if 32 <= buf[0] < 127 else \
            f"byte {buf[0]:#04x}"
        raise sp.SnapshotError(f"{r.source}: not a pickle: it starts with {what}",
                               tip="pass a file written by torch.cuda.memory._dump_snapshot()")
    stack: list[Any] = []
    metastack: list[list[Any]] = []
    memo = r.memo
    fastpath = r.fast
    at = 0

    def need(n: int) -> None:
        nonlocal buf, pos
        if len(buf) - pos < n:
            if inp.offset + pos + n > inp.size:
                raise _fail(r, "the file ends in the middle of a value; it is truncated", at)
            buf, pos = inp.refill(buf, pos, n)

    def line() -> bytes:
        nonlocal buf, pos
        end = buf.find(b"\n", pos, pos + sp.MAX_LINE)
        while end < 0:
            if len(buf) - pos >= sp.MAX_LINE:
                raise _fail(r, f"a text argument longer than {sp.MAX_LINE} bytes", at)
            if inp.eof:
                raise _fail(r, "the file ends in the middle of a value; it is truncated", at)
            buf, pos = inp.refill(buf, pos, len(buf) - pos + inp.chunk)
            end = buf.find(b"\n", pos, pos + sp.MAX_LINE)
        text = buf[pos:end]
        pos = end + 1
        return text

    try:
        while True:
            if len(buf) - pos < 16 and not inp.eof:
                buf, pos = inp.refill(buf, pos)
            if pos >= len(buf):
                raise _fail(r, "the file ends before the pickle does; it is truncated", at)
            at = inp.offset + pos
            op = buf[pos]
            if op == 0x7D and metastack:  # '}' a dict inside a list: maybe a trace entry
                region = metastack[-1]
                if region and type(region[-1]) is list:
                    if len(buf) - pos < fastpath.lookahead and not inp.eof:
                        buf, pos = inp.refill(buf, pos, fastpath.lookahead)
                    new = fastpath.entries(buf, pos, region[-1])
                    if new != pos:
                        pos = new
                        continue
            pos += 1
            if op == 0x6A:  # j LONG_BINGET
                need(4)
                stack.append(r.get(int.from_bytes(buf[pos:pos + 4], "little"), at))
                pos += 4
            elif op == 0x68:  # h BINGET
                need(1)
                stack.append(r.get(buf[pos], at))
                pos += 1
            elif op == 0x94:  # MEMOIZE
                r.put(len(memo) + len(r.sparse), stack[-1])
            elif op == 0x8C:  # SHORT_BINUNICODE
                need(1)
                n = buf[pos]
                need(1 + n)
                stack.append(buf[pos + 1:pos + 1 + n].decode("utf-8", "surrogatepass"))
                pos += 1 + n
            elif op in (0x58, 0x8D):  # X BINUNICODE, BINUNICODE8
                width = 4 if op == 0x58 else 8
                need(width)
                n = int.from_bytes(buf[pos:pos + width], "little")
                pos += width
                if inp.offset + pos + n > inp.size:
                    raise _fail(r, f"a string of {n} bytes in a file that has "
                                   f"{inp.size - inp.offset - pos} left", at)
                need(n)
                stack.append(buf[pos:pos + n].decode("utf-8", "surrogatepass"))
                pos += n
            elif op == 0x4B:  # K BININT1
                need(1)
                stack.append(buf[pos])
                pos += 1
            elif op == 0x4D:  # M BININT2
                need(2)
                stack.append(buf[pos] | buf[pos + 1] << 8)
                pos += 2
            elif op == 0x4A:  # J BININT
                need(4)
                stack.append(int.from_bytes(buf[pos:pos + 4], "little", signed=True))
                pos += 4
            elif op in (0x8A, 0x8B):  # LONG1, LONG4
                width = 1 if op == 0x8A else 4
                need(width)
                n = int.from_bytes(buf[pos:pos + width], "little")
                pos += width
                if n > sp.MAX_LONG:
                    raise _fail(r, f"an integer of {n} bytes; the format's fit in 9", at)
                need(n)
                stack.append(int.from_bytes(buf[pos:pos + n], "little", signed=True))
                pos += n
            elif op == 0x28:  # ( MARK
                metastack.append(stack)
                stack = []
                if len(metastack) > sp.MAX_MARKS:
                    raise _fail(r, f"nested more than {sp.MAX_MARKS} levels deep", at)
            elif op == 0x7D:  # } EMPTY_DICT
                stack.append({})
            elif op == 0x5D:  # ] EMPTY_LIST
                stack.append([])
            elif op == 0x75:  # u SETITEMS
                items = stack
                stack = metastack.pop()
                d = stack[-1]
                if type(d) is not dict or len(items) % 2:
                    raise _fail(r, "SETITEMS without a dict and pairs of items", at)
                _set_items(r, d, items)
                if "action" in d and metastack:
                    owner = metastack[-1]
                    if owner and type(owner[-1]) is list:
                        stack.pop()
                        r.consume(owner[-1], d, at)
            elif op == 0x65:  # e APPENDS
                items = stack
                stack = metastack.pop()
                _append(r, stack[-1], items, at)
            elif op == 0x61:  # a APPEND
                value = stack.pop()
                _append(r, stack[-1], [value], at)
            elif op == 0x73:  # s SETITEM
                value = stack.pop()
                key = stack.pop()
                d = stack[-1]
                if type(d) is not dict:
                    raise _fail(r, f"SETITEM on a {type(d).__name__}", at)
                _set_items(r, d, [key, value])
            elif op == 0x71:  # q BINPUT
                need(1)
                r.put(buf[pos], stack[-1])
                pos += 1
            elif op == 0x72:  # r LONG_BINPUT
                need(4)
                r.put(int.from_bytes(buf[pos:pos + 4], "little"), stack[-1])
                pos += 4
            elif op == 0x95:  # FRAME: a length header, nothing to build
                need(8)
                pos += 8
            elif op == 0x86:  # TUPLE2
                b = stack.pop()
                stack[-1] = (stack[-1], b)
            elif op == 0x85:  # TUPLE1
                stack[-1] = (stack[-1],)
            elif op == 0x87:  # TUPLE3
                c, b = stack.pop(), stack.pop()
                stack[-1] = (stack[-1], b, c)
            elif op == 0x29:  # ) EMPTY_TUPLE
                stack.append(())
            elif op == 0x74:  # t TUPLE
                items = stack
                stack = metastack.pop()
                stack.append(tuple(items))
            elif op == 0x4E:  # N NONE
                stack.append(None)
            elif op == 0x88:  # NEWTRUE
                stack.append(True)
            elif op == 0x89:  # NEWFALSE
                stack.append(False)
            elif op == 0x47:  # G BINFLOAT
                need(8)
                stack.append(_DOUBLE.unpack_from(buf, pos)[0])
                pos += 8
            elif op == 0x80:  # PROTO
                need(1)
                r.protocol = buf[pos]
                pos += 1
                if r.protocol > sp.HIGHEST_PROTOCOL:
                    raise _fail(r, f"pickle protocol {r.protocol}; this reader knows "
                                   f"0 to {sp.HIGHEST_PROTOCOL}", at)
            elif op == 0x2E:  # . STOP
                return stack.pop()
            elif op == 0x64:  # d DICT
                items = stack
                stack = metastack.pop()
                if len(items) % 2:
                    raise _fail(r, "DICT with an odd number of items", at)
                d = {}
                _set_items(r, d, items)
                stack.append(d)
            elif op == 0x6C:  # l LIST
                items = stack
                stack = metastack.pop()
                made: list[Any] = []
                _append(r, made, items, at)
                stack.append(made)
            elif op == 0x30:  # 0 POP
                if stack:
                    stack.pop()
                else:
                    stack = metastack.pop()
            elif op == 0x31:  # 1 POP_MARK
                stack = metastack.pop()
            elif op == 0x32:  # 2 DUP
                stack.append(stack[-1])
            elif op == 0x70:  # p PUT
                r.put(_index(r, line(), at), stack[-1])
            elif op == 0x67:  # g GET
                stack.append(r.get(_index(r, line(), at), at))
            elif op == 0x49:  # I INT (True/False in protocol 0)
                text = line()
                stack.append(True if text == b"01" else False if text == b"00"
                             else _int_text(r, text, at))
            elif op == 0x4C:  # L LONG
                stack.append(_int_text(r, line().rstrip(b"L"), at))
            elif op == 0x46:  # F FLOAT
                stack.append(float(line()))
            elif op == 0x56:  # V UNICODE
                stack.append(sp._RAW_UNICODE(line())[0])
            elif op in sp._REFUSED:
                raise r.refuse(f"the pickle uses {sp._REFUSED[op]}; a CUDA memory snapshot "
                               "holds only dicts, lists, strings and numbers", at,
                               tip="never unpickle this file with pickle.load: it may run "
                                   "code")
            else:
                raise _fail(r, f"byte {op:#04x} is not a pickle opcode; the file is "
                               "not a pickle or is damaged", at)
            if len(stack) > sp.MAX_STACK:
                raise _fail(r, f"more than {sp.MAX_STACK} values between two marks", at)
    except sp.SnapshotError:
        raise
    except IndexError:
        raise _fail(r, "the pickle takes a value from an empty stack; it is damaged",
                    at) from None
    except UnicodeDecodeError:
        raise _fail(r, "a string that is not valid UTF-8; the file is damaged", at) from None
    except (TypeError, ValueError, KeyError, OverflowError, struct.error) as err:
        raise _fail(r, f"the pickle is damaged ({type(err).__name__}: {str(err)[:100]})",
                    at) from None


def _index(r: Any, text: bytes, at: int) -> int:
    if not text.isdigit() or len(text) > 12:
        raise _fail(r, "a memo index that is not a number", at)
    return int(text)


def _int_text(r: Any, text: bytes, at: int) -> int:
    if len(text) > 3 * sp.MAX_LONG:
        raise _fail(r, f"an integer of {len(text)} digits; the format's have at most 20",
                    at)
    return int(text)


def _set_items(r: Any, d: dict[Any, Any], items: list[Any]) -> None:
    for i in range(0, len(items), 2):
        key, value = items[i], items[i + 1]
        if key == "frames" and type(value) is list:
            value = r.stack_of(value)
        d[key] = value


def _append(r: Any, target: Any, items: list[Any], at: int) -> None:
    if type(target) is not list:
        raise _fail(r, f"APPEND to a {type(target).__name__}", at)
    for item in items:
        if type(item) is dict:
            if "action" in item:
                r.consume(target, item, at)
                continue
            if "filename" in item:
                item = r.frame_of(item)
        target.append(item)
