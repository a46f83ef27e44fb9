"""CUDA memory snapshots built from PyTorch's documented format, for tests and benchmarks.

The layout follows ``torch.cuda.memory._snapshot()`` (its docstring, and
``THCPModule_memorySnapshot`` in ``torch/csrc/cuda/Module.cpp``, which builds the dict):

* ``segments``: one dict per ``cudaMalloc`` segment (``device``, ``address``,
  ``total_size``, ``allocated_size``, ``active_size``, ``requested_size``, ``stream``,
  ``segment_type``, ``segment_pool_id`` (a tuple), ``is_expandable``, ``frames``,
  ``blocks``); each block a dict (``address``, ``size``, ``requested_size``, ``state``,
  ``frames``);
* ``device_traces``: per device, the trace entries in order (``action``, ``addr`` or
  ``device_free`` for ``oom``, ``size``, ``stream``, ``time_us``, ``compile_context``,
  ``user_metadata``, then ``frames`` when a stack was recorded);
* ``allocator_settings`` and ``external_annotations``.

The objects are shared the way PyTorch shares them, which is what makes the pickle small:
the key strings are one object each, a frame dict is one object per distinct frame,
each recorded traceback is one list (a block and the trace entry that allocated it share
it), and blocks without a stack share one empty list.

:class:`TrainingRun` simulates a training loop over a small caching allocator (blocks
reused by size, segments of 2 MiB / 20 MiB / rounded, ``empty_cache`` releasing free
segments). :func:`write_streamed` writes such a run with protocol 4 opcodes directly, so
a snapshot of any size is written in bounded memory; for a run small enough to hold,
its bytes are exactly those of ``pickle.dumps(run.snapshot(), protocol=4)``.
"""

from __future__ import annotations

import io
import pickle
import random
import struct
from typing import Any, BinaryIO, Iterator

KiB, MiB = 1 << 10, 1 << 20

# one object per key, as PyTorch's py::str constants
ACTION, ADDR, SIZE, STREAM, TIME_US, FRAMES = "action", "addr", "size", "stream", "time_us", "frames"
COMPILE_CONTEXT, USER_METADATA, DEVICE_FREE = "compile_context", "user_metadata", "device_free"
SITE = "/opt/conda/lib/python3.11/site-packages/torch"
CPP_ALLOC = [("/pytorch/c10/cuda/CUDACachingAllocator.cpp", 1200 + i,
              f"c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc_{i}()")
             for i in range(12)]
CPP_OPS = [("/pytorch/aten/src/ATen/native/cuda/Op.cu", 40 + i, f"at::native::op_{i}()")
           for i in range(64)]
CPP_OUTER = [("??", 0, "_PyEval_EvalFrameDefault"), ("??", 0, "Py_RunMain"),
             ("??", 0, "__libc_start_main"), ("??", 0, "_start")]


class Frames:
    """Interned frame dicts (one object per distinct frame) and traceback lists."""

    def __init__(self) -> None:
        self._frames: dict[tuple[str, int, str], dict[str, Any]] = {}

    def frame(self, filename: str, line: int, name: str) -> dict[str, Any]:
        key = (filename, line, name)
        if key not in self._frames:
            self._frames[key] = {"name": name, "filename": filename, "line": line}
        return self._frames[key]

    def stack(self, *frames: tuple[str, int, str]) -> list[dict[str, Any]]:
        """A new traceback list (innermost frame first) of shared frame dicts."""
        return [self.frame(*f) for f in frames]


def entry(action: str, addr: int, size: int, time_us: int, frames: list[Any] | None = None,
          stream: int = 0) -> dict[str, Any]:
    """One trace entry, keys in PyTorch's order (``frames`` last, absent without a stack)."""
    e: dict[str, Any] = {ACTION: action, (DEVICE_FREE if action == "oom" else ADDR): addr,
                         SIZE: size, STREAM: stream, TIME_US: time_us,
                         COMPILE_CONTEXT: "", USER_METADATA: ""}
    if frames is not None:
        e[FRAMES] = frames
    return e


def block(address: int, size: int, requested: int, state: str,
          frames: list[Any]) -> dict[str, Any]:
    return {"address": address, "size": size, "requested_size": requested, "state": state,
            "frames": frames}


def segment(address: int, blocks: list[dict[str, Any]], frames: list[Any], *,
            device: int = 0, stream: int = 0) -> dict[str, Any]:
    total = sum(b["size"] for b in blocks)
    allocated = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
    active = sum(b["size"] for b in blocks if b["state"] != "inactive")
    requested = sum(b["requested_size"] for b in blocks if b["state"] != "inactive")
    return {"device": device, "address": address, "total_size": total,
            "allocated_size": allocated, "active_size": active, "requested_size": requested,
            "stream": stream, "segment_type": "large" if total > 2 * MiB else "small",
            "segment_pool_id": (0, 0), "is_expandable": False, "frames": frames,
            "blocks": blocks}


SETTINGS = {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1,
            "garbage_collection_threshold": 0.0, "expandable_segments": False,
            "pinned_num_register_threads": 1, "release_lock_on_cudamalloc": False,
            "pinned_use_cuda_host_register": False,
            "roundup_power2_divisions": {str(1 << i): 0 for i in range(6)}}


def snapshot(segments: list[Any], traces: list[list[Any]]) -> dict[str, Any]:
    return {"segments": segments, "device_traces": traces,
            "allocator_settings": SETTINGS, "external_annotations": []}


def write(path: Any, snap: dict[str, Any], protocol: int = 4) -> None:
    with open(path, "wb") as fh:
        pickle.dump(snap, fh, protocol=protocol)


def _round(size: int) -> int:
    return max(512, -(-size // 512) * 512)


def _segment_size(rounded: int) -> int:
    if rounded <= MiB:
        return 2 * MiB
    if rounded < 10 * MiB:
        return 20 * MiB
    return -(-rounded // (2 * MiB)) * 2 * MiB


class TrainingRun:
    """A simulated training loop and the allocator under it (deterministic per seed).

    Each step runs a forward pass (one activation per layer, from ``model.py``), a backward
    (a gradient per layer, activations freed), an optimizer step (temporaries) and
    ``zero_grad(set_to_none=True)``. Every allocation and free is a trace entry with the
    stack ``_record_memory_history(stacks="all")`` records: C++ frames of the allocator and
    the op, torch's Python frames, the script's frames (one ``forward`` per level of
    module nesting, each called through ``nn.Module``), then the interpreter's C++ frames.
    A call site has one stack, the same at every step.

    Args:
        steps: training steps.
        layers: layers of the model.
        hidden: activation bytes of a layer (varied per layer).
        leak_every: keep one activation alive every this many steps (0: no leak).
        empty_cache: call ``torch.cuda.empty_cache()`` at the end of every step.
        cpp: record C++ frames too.
        depth: levels of module nesting above each layer (each adds three Python frames).
        params: parameter tensors allocated before the first step, each from its own
            line of ``model.py`` (default: one per layer); alive to the end, so they are
            blocks of the final segments.
        seed: the random seed (times between entries).
    """

    def __init__(self, steps: int = 20, layers: int = 6, hidden: int = 3 * MiB, *,
                 leak_every: int = 0, empty_cache: bool = False, cpp: bool = True,
                 depth: int = 0, params: int | None = None, seed: int = 0) -> None:
        self.steps, self.layers, self.hidden = steps, layers, hidden
        self.leak_every, self.empty_cache, self.cpp, self.seed = leak_every, empty_cache, cpp, seed
        self.depth = depth
        self.params = layers if params is None else params
        self.frames = Frames()
        self.shared: dict[int, list[Any]] = {}  # alloc serial -> its traceback (live at the end)
        self._templates: dict[tuple[int, str], tuple[Any, ...]] = {}

    # -- stacks ----------------------------------------------------------------------------
    def _stack(self, layer: int, kind: str) -> list[Any]:
        """A new traceback list of the call site (``layer``, ``kind``)."""
        template = self._templates.get((layer, kind))
        if template is None:
            template = tuple(self.frames.stack(*self._site(layer, kind)))
            self._templates[(layer, kind)] = template
        return list(template)

    def _site(self, layer: int, kind: str) -> list[tuple[str, int, str]]:
        start = (7 * layer + 13 * len(kind)) % 56
        inner = CPP_ALLOC + CPP_OPS[start:start + 2 + (layer + len(kind)) % 6] if self.cpp else []
        outer = CPP_OUTER if self.cpp else []
        if kind == "cache":
            return [*inner, *self._torch(kind), ("train.py", 50, "train_step"),
                    ("train.py", 80, "main"), ("train.py", 90, "<module>"), *outer]
        if kind == "param":
            return [*inner, (f"{SITE}/nn/modules/linear.py", 106, "__init__"),
                    ("model.py", 300 + layer, "__init__"), ("train.py", 70, "main"),
                    ("train.py", 90, "<module>"), *outer]
        name = "backward" if kind == "grad" else "forward"
        user = [("model.py", 20 + 3 * layer, name)]
        call = [(f"{SITE}/nn/modules/module.py", 1762, "_call_impl"),
                (f"{SITE}/nn/modules/module.py", 1751, "_wrapped_call_impl")]
        for level in range(self.depth):  # the blocks that hold the layer, innermost first
            user += [*call, ("model.py", 200 + 10 * level + layer % 4, name)]
        user += [("train.py", 41 if kind == "act" else 44 if kind == "grad" else 47,
                  "train_step"), ("train.py", 80, "main"), ("train.py", 90, "<module>")]
        return [*inner, *self._torch(kind), *user, *outer]

    @staticmethod
    def _torch(kind: str) -> list[tuple[str, int, str]]:
        base = {"act": [(f"{SITE}/nn/modules/linear.py", 125, "forward"),
                        (f"{SITE}/nn/modules/module.py", 1762, "_call_impl"),
                        (f"{SITE}/nn/modules/module.py", 1751, "_wrapped_call_impl")],
                "grad": [(f"{SITE}/autograd/graph.py", 824, "_engine_run_backward"),
                         (f"{SITE}/autograd/__init__.py", 353, "backward"),
                         (f"{SITE}/_tensor.py", 648, "backward")],
                "opt": [(f"{SITE}/optim/adam.py", 410, "_single_tensor_adam"),
                        (f"{SITE}/optim/adam.py", 247, "step"),
                        (f"{SITE}/optim/optimizer.py", 485, "wrapper")],
                "cache": [(f"{SITE}/cuda/memory.py", 224, "empty_cache")]}
        return base[kind]

    # -- the run ---------------------------------------------------------------------------
    def events(self) -> Iterator[dict[str, Any]]:
        """The trace entries in order; afterwards :meth:`segments` is the final state."""
        rnd = random.Random(self.seed)
        self._free: dict[int, list[int]] = {}
        self._segs: dict[int, list[int]] = {}  # segment address -> [size, live blocks, bump]
        self._live: dict[int, tuple[int, int, int, list[Any]]] = {}  # addr -> rounded, req, serial, frames
        self._next = 0x7F0000000000
        self._t = 1_700_000_000_000_000
        self._serial = 0
        self._queue: list[dict[str, Any]] = []
        params = [self._alloc(rnd, self.hidden // (1 + i % 5) + 4096 * i, "param", i)
                  for i in range(self.params)]
        yield from self._pending(rnd)
        kept: list[int] = []
        for step in range(1, self.steps + 1):
            acts = []
            for layer in range(self.layers):
                acts.append(self._alloc(rnd, self.hidden + 512 * (layer % 3), "act", layer))
                yield from self._pending(rnd)
            grads = []
            for layer in reversed(range(self.layers)):
                grads.append(self._alloc(rnd, 4 * self.hidden + 4096 * layer, "grad", layer))
                yield from self._pending(rnd)
                if self.leak_every and step % self.leak_every == 0 and layer == 0:
                    kept.append(acts[layer])
                else:
                    yield from self._release(rnd, acts[layer], "grad", layer)
            tmp = self._alloc(rnd, self.hidden // 2, "opt", 0)
            yield from self._pending(rnd)
            yield from self._release(rnd, tmp, "opt", 0)
            for layer, g in enumerate(grads):
                yield from self._release(rnd, g, "opt", layer)
            if self.empty_cache:
                yield from self._empty_cache(rnd)
        del params, kept

    def _tick(self, rnd: random.Random) -> int:
        self._t += rnd.randrange(5, 400)
        return self._t

    def _alloc(self, rnd: random.Random, requested: int, kind: str, layer: int) -> int:
        size = _round(requested)
        self._serial += 1
        frames = self.shared.get(self._serial) or self._stack(layer, kind)
        if self._free.get(size):
            addr = self._free[size].pop()
        else:
            addr = self._carve(rnd, size, frames)
        seg = self._segment_of(addr)
        self._segs[seg][1] += 1
        self._live[addr] = (size, requested, self._serial, frames)
        self._queue.append(entry("alloc", addr, requested, self._tick(rnd), frames))
        return addr

    def _carve(self, rnd: random.Random, size: int, frames: list[Any]) -> int:
        for seg, (total, _live, bump) in self._segs.items():
            if bump + size <= total and (total == 2 * MiB) == (size <= MiB):
                self._segs[seg][2] += size
                return seg + bump
        total = _segment_size(size)
        seg = self._next
        self._next += total + 2 * MiB
        self._segs[seg] = [total, 0, size]
        self._queue.append(entry("segment_alloc", seg, total, self._tick(rnd), frames))
        return seg

    def _segment_of(self, addr: int) -> int:
        for seg, (total, _l, _b) in self._segs.items():
            if seg <= addr < seg + total:
                return seg
        raise AssertionError(addr)

    def _pending(self, rnd: random.Random) -> Iterator[dict[str, Any]]:
        queue, self._queue = self._queue, []
        yield from queue  # a new segment comes right before the block carved from it

    def _release(self, rnd: random.Random, addr: int, kind: str,
                 layer: int) -> Iterator[dict[str, Any]]:
        size, requested, _serial, _frames = self._live.pop(addr)
        frames = self._stack(layer, kind)
        yield entry("free_requested", addr, requested, self._tick(rnd), frames)
        yield entry("free_completed", addr, requested, self._tick(rnd), frames)
        self._segs[self._segment_of(addr)][1] -= 1
        self._free.setdefault(size, []).append(addr)

    def _empty_cache(self, rnd: random.Random) -> Iterator[dict[str, Any]]:
        frames = self._stack(0, "cache")
        for seg, (total, live, _bump) in list(self._segs.items()):
            if live == 0:
                del self._segs[seg]
                for addrs in self._free.values():
                    addrs[:] = [a for a in addrs if not seg <= a < seg + total]
                yield entry("segment_free", seg, total, self._tick(rnd), frames)

    def segments(self) -> list[dict[str, Any]]:
        """The segments and blocks at the end of :meth:`events` (live blocks share their
        allocation's traceback; free space is one inactive block per gap)."""
        empty: list[Any] = []
        out = []
        for seg, (total, _live, _bump) in sorted(self._segs.items()):
            blocks, offset = [], 0
            for addr in sorted(a for a in self._live if seg <= a < seg + total):
                size, requested, serial, frames = self._live[addr]
                if addr - seg > offset:
                    blocks.append(block(seg + offset, addr - seg - offset, 0, "inactive", empty))
                blocks.append(block(addr, size, requested, "active_allocated", frames))
                self.shared[serial] = frames
                offset = addr - seg + size
            if offset < total:
                blocks.append(block(seg + offset, total - offset, 0, "inactive", empty))
            out.append(segment(seg, blocks, empty))
        return out

    def snapshot(self) -> dict[str, Any]:
        """The whole snapshot as one object (for runs small enough to hold)."""
        trace = list(self.events())
        return snapshot(self.segments(), [trace])


class _StreamPickler:
    """Protocol 4 opcodes exactly as ``pickle.dumps(obj, protocol=4)`` writes them, with
    the top-level dict and its trace lists written piece by piece."""

    FRAME_TARGET = 64 * KiB

    def __init__(self, fh: BinaryIO) -> None:
        self.fh = fh
        self.frame = io.BytesIO()
        self.memo: dict[int, int] = {}
        self.count = 0
        self.held: dict[int, Any] = {}

    def w(self, data: bytes) -> None:
        self.frame.write(data)

    def commit(self, force: bool = False) -> None:
        if self.frame.tell() >= self.FRAME_TARGET or (force and self.frame.tell()):
            data = self.frame.getvalue()
            if len(data) >= 4:
                self.fh.write(b"\x95" + struct.pack("<Q", len(data)))
            self.fh.write(data)
            self.frame = io.BytesIO()

    def memoize(self, obj: Any, keep: bool = True) -> None:
        self.w(b"\x94")
        if keep:
            self.memo[id(obj)] = self.count
            self.held[id(obj)] = obj
        self.count += 1

    def forget(self, obj: Any) -> None:
        self.memo.pop(id(obj), None)
        self.held.pop(id(obj), None)

    def save(self, obj: Any, keep: bool = True) -> None:
        self.commit()
        idx = self.memo.get(id(obj))
        if idx is not None:
            self.w(b"h" + bytes([idx]) if idx < 256 else b"j" + struct.pack("<I", idx))
            return
        t = type(obj)
        if obj is None:
            self.w(b"N")
        elif t is bool:
            self.w(b"\x88" if obj else b"\x89")
        elif t is int:
            if 0 <= obj <= 0xFF:
                self.w(b"K" + bytes([obj]))
            elif 0 <= obj <= 0xFFFF:
                self.w(b"M" + struct.pack("<H", obj))
            elif -0x80000000 <= obj <= 0x7FFFFFFF:
                self.w(b"J" + struct.pack("<i", obj))
            else:
                enc = pickle.encode_long(obj)
                self.w(b"\x8a" + bytes([len(enc)]) + enc)
        elif t is float:
            self.w(b"G" + struct.pack(">d", obj))
        elif t is str:
            enc = obj.encode("utf-8", "surrogatepass")
            assert len(enc) < 256
            self.w(b"\x8c" + bytes([len(enc)]) + enc)
            self.memoize(obj)
        elif t is tuple:
            assert 0 < len(obj) <= 3
            for x in obj:
                self.save(x)
            self.w(b"\x85\x86\x87"[len(obj) - 1:len(obj)])
            self.memoize(obj)
        elif t is list:
            self.w(b"]")
            self.memoize(obj, keep)
            self.items(obj)
        elif t is dict:
            self.w(b"}")
            self.memoize(obj, keep)
            self.pairs(list(obj.items()))
        else:  # pragma: no cover
            raise TypeError(t)

    def _int(self, value: int) -> bytes:
        if 0 <= value <= 0xFF:
            return b"K" + bytes([value])
        if 0 <= value <= 0xFFFF:
            return b"M" + struct.pack("<H", value)
        if -0x80000000 <= value <= 0x7FFFFFFF:
            return b"J" + struct.pack("<i", value)
        enc = pickle.encode_long(value)
        return b"\x8a" + bytes([len(enc)]) + enc

    def _get(self, obj: Any) -> bytes | None:
        idx = self.memo.get(id(obj))
        if idx is None:
            return None
        return b"h" + bytes([idx]) if idx < 256 else b"j" + struct.pack("<I", idx)

    def save_entry(self, e: dict[str, Any]) -> None:
        """``save(e, keep=False)`` for a trace entry, faster: the same bytes, built from
        cached pieces, with frame boundaries where :meth:`save` would put them (before
        each key, each value and each item of the frames list)."""
        pieces = [b"}\x94("]
        counts = 1
        new_list = None
        for key, value in e.items():
            k = self._get(key)
            if k is None or len(e) < 2:
                return self.save(e, keep=False)
            pieces.append(k)
            t = type(value)
            if t is int:
                pieces.append(self._int(value))
            elif t is list and id(value) not in self.memo:
                gets = [self._get(f) for f in value]
                if len(value) > 1000 or None in gets:
                    return self.save(e, keep=False)
                if len(value) > 1:
                    pieces.append(b"]\x94(")
                    pieces.extend(gets)
                    pieces[-1] += b"e"
                elif value:
                    pieces.append(b"]\x94")
                    pieces.append(gets[0] + b"a")
                else:
                    pieces.append(b"]\x94")
                counts += 1
                new_list = value
            else:
                v = self._get(value)
                if v is None:
                    return self.save(e, keep=False)
                pieces.append(v)
        pieces[-1] += b"u"
        total = sum(map(len, pieces))
        if self.frame.tell() + total - len(pieces[-1]) < self.FRAME_TARGET:
            self.w(b"".join(pieces))
        else:
            for piece in pieces:
                self.commit()
                self.w(piece)
        self.count += counts
        if new_list is not None:  # memoized right after the dict (one index before the end)
            self.memo[id(new_list)] = self.count - 1
            self.held[id(new_list)] = new_list
        return None

    def items(self, items: Any, keep: bool = True, after: Any = None) -> None:
        batch: list[Any] = []
        for x in items:
            batch.append(x)
            if len(batch) == 1000:
                self._items(batch, keep, after)
                batch = []
        if batch:
            self._items(batch, keep, after)

    def _items(self, batch: list[Any], keep: bool, after: Any) -> None:
        if len(batch) > 1:
            self.w(b"(")
        for x in batch:
            if after is not None:  # trace entries
                self.save_entry(x)
                after(x)
            else:
                self.save(x, keep)
        self.w(b"e" if len(batch) > 1 else b"a")

    def pairs(self, pairs: list[tuple[Any, Any]]) -> None:
        for i in range(0, len(pairs), 1000):
            chunk = pairs[i:i + 1000]
            if len(chunk) > 1:
                self.w(b"(")
            for k, v in chunk:
                self.save(k)
                self.save(v)
            self.w(b"u" if len(chunk) > 1 else b"s")


def write_streamed(path: Any, run: TrainingRun) -> int:
    """Write ``run`` as a protocol 4 snapshot pickle without holding its trace; return the
    number of trace entries."""
    for _ in run.events():  # first pass: the final state, written first in the file
        pass
    segments = run.segments()
    count = 0
    with open(path, "wb") as fh:
        p = _StreamPickler(fh)
        fh.write(b"\x80\x04")
        p.commit()
        p.w(b"}")
        p.memoize(object())
        p.w(b"(")
        p.save("segments")
        p.save(segments)
        p.save("device_traces")
        p.commit()
        p.w(b"]")
        p.memoize(object())
        p.commit()
        p.w(b"]")
        p.memoize(object())

        # a traceback is shared by neighbouring entries only (segment_alloc + alloc,
        # free_requested + free_completed) or by a block: forget the others once written
        shared = {id(f) for f in run.shared.values()}
        previous: list[Any] = []

        def written(e: dict[str, Any]) -> None:
            nonlocal count
            count += 1
            frames = e.get(FRAMES)
            if previous and previous[0] is not frames and id(previous[0]) not in shared:
                p.forget(previous[0])
            previous[:] = [frames]

        p.items(run.events(), keep=False, after=written)  # second pass: streamed
        p.w(b"a")
        p.save("allocator_settings")
        p.save(SETTINGS)
        p.save("external_annotations")
        p.save([])
        p.w(b"u.")
        p.commit(force=True)
    return count


#: the run of the demo snapshot quoted in docs/snapshot.md
DEMO = dict(steps=60, layers=6, leak_every=3, empty_cache=True, depth=1)


def main(argv: list[str] | None = None) -> None:
    """``python tests/report/snapshot_factory.py OUT``: write the demo snapshot of
    docs/snapshot.md (a simulated training run that keeps one activation every 3 steps
    and calls ``torch.cuda.empty_cache()`` every step)."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        raise SystemExit("usage: python tests/report/snapshot_factory.py OUT.pickle")
    write(args[0], TrainingRun(**DEMO).snapshot())


if __name__ == "__main__":
    main()
