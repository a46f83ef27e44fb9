"""Cost of torchmem's lifetime tools: scopes (per op), cleanup (per call), release.

Prints four tables:

0. one torch call on a small tensor: bare, under the no-op floors, under each engine;
1. step time of an MLP and an LSTM-cell training step: no mode (baseline), a no-op
   TorchFunctionMode and ``torchmem.scope()`` (the default "calls" engine), a no-op
   TorchDispatchMode and ``torchmem.scope(engine="dispatch")``, around each step;
2. a loop whose temporaries are trapped in reference cycles: heap growth and step time
   without a scope, with ``gc.collect()`` every step (TorchSharp's technique 1), with
   ``torchmem.every(n=10)``, and with a scope per step (technique 2, made automatic);
3. ``torchmem.cleanup()`` cost against the number of live Python objects;
4. ``torchmem.release`` of a module vs ``del`` + ``gc.collect()``.

Every row is the median of ``--rounds`` rounds; the variants of one table run
interleaved (A/B/C, A/B/C...) in one process, so a machine shared with other work
slows them alike. Usage::

    python benchmarks/scope.py [--rounds 7] [--steps 20]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import statistics
import time
from typing import Any, Callable

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

import torchmem
from torchmem.collect.cpu import heap_bytes

MIB = 1 << 20


class _NoOp(TorchDispatchMode):
    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        return func(*args, **(kwargs or {}))


class _FnNoOp(TorchFunctionMode):
    """The floor of the other interposition point: a no-op torch-function mode."""

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        return func(*args, **(kwargs or {}))


class _Count(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.n += 1
        return func(*args, **(kwargs or {}))


def _mlp() -> Callable[[], None]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 10),
    )
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))

    def step() -> None:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def _lstm() -> Callable[[], None]:
    torch.manual_seed(0)
    cell = torch.nn.LSTMCell(16, 32)
    head = torch.nn.Linear(32, 1)
    opt = torch.optim.SGD(list(cell.parameters()) + list(head.parameters()), lr=0.01)
    xs = torch.randn(20, 8, 16)

    def step() -> None:
        h = c = torch.zeros(8, 32)
        for t in range(xs.shape[0]):
            h, c = cell(xs[t], (h, c))
        loss = head(h).pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def _time(fn: Callable[[], None], steps: int, wrap: str) -> float:
    t0 = time.perf_counter()
    for _ in range(steps):
        if wrap == "none":
            fn()
        elif wrap == "noop":
            with _NoOp():
                fn()
        elif wrap == "fn_noop":
            with _FnNoOp():
                fn()
        elif wrap == "scope_dispatch":
            with torchmem.scope(engine="dispatch"):
                fn()
        else:
            with torchmem.scope():
                fn()
    return (time.perf_counter() - t0) / steps


def table_micro(rounds: int) -> None:
    print(f"\n0. one torch call on a 16-float tensor, 2000 calls per round (median of {rounds} rounds)")
    print(f"{'op':<22} {'baseline us':>12} {'fn no-op us':>12} {'scope us':>9} "
          f"{'dispatch no-op us':>18} {'scope dispatch us':>18}")
    x = torch.ones(16)
    ops = {"x + 1 (new storage)": lambda: x + 1, "x.view(4, 4) (view)": lambda: x.view(4, 4)}
    wraps = ("none", "fn_noop", "scope", "noop", "scope_dispatch")
    for label, op in ops.items():
        def run(wrap: str) -> float:
            ctx: Any = {"none": contextlib.nullcontext, "fn_noop": _FnNoOp, "noop": _NoOp,
                        "scope": torchmem.scope,
                        "scope_dispatch": lambda: torchmem.scope(engine="dispatch")}[wrap]()
            t0 = time.perf_counter()
            with ctx:
                for _ in range(2000):
                    op()
            return (time.perf_counter() - t0) / 2000 * 1e6

        res: dict[str, list[float]] = {w: [] for w in wraps}
        for _ in range(rounds):
            for w in wraps:
                res[w].append(run(w))
        b, f, sc, n, sd = (statistics.median(res[w]) for w in wraps)
        print(f"{label:<22} {b:>12.2f} {f:>12.2f} {sc:>9.2f} {n:>18.2f} {sd:>18.2f}")


def table_per_op(rounds: int, steps: int) -> None:
    print("\n1. a scope around each training step (default engine \"calls\", and "
          f"engine=\"dispatch\") vs the floors of Python interposition (median of {rounds} rounds)")
    print(f"{'workload':<10} {'ops/step':>8} {'baseline ms':>12} {'fn no-op x':>11} "
          f"{'scope x':>8} {'dispatch no-op x':>17} {'scope dispatch x':>17}")
    variants = ("none", "fn_noop", "scope", "noop", "scope_dispatch")
    for name, make in (("mlp", _mlp), ("lstm_cell", _lstm)):
        fn = make()
        counter = _Count()
        with counter:
            fn()
        ops = counter.n
        for w in variants:
            _time(fn, 2, w)  # warm-up
        res: dict[str, list[float]] = {w: [] for w in variants}
        for _ in range(rounds):
            for w in variants:
                res[w].append(_time(fn, steps, w))
        b, f, s, n, sd = (statistics.median(res[w]) for w in variants)
        print(f"{name:<10} {ops:>8} {b * 1e3:>12.3f} {f / b:>11.2f} {s / b:>8.2f} "
              f"{n / b:>17.2f} {sd / b:>17.2f}")


class _Node:
    pass


def _cyclic_step(x: torch.Tensor) -> float:
    a = x * 2
    b = torch.tanh(a)
    node = _Node()
    node.me = node  # a reference cycle holds the temporaries
    node.ts = (a, b)
    return float(b[0])


def table_cycles(rounds: int, steps: int) -> None:
    print(f"\n2. loop of {steps} steps, 2 x 1 MiB temporaries per step trapped in a cycle "
          f"(gc disabled; median of {rounds})")
    print(f"{'variant':<28} {'heap growth':>12} {'ms/step':>9}")
    x = torch.ones(MIB // 4)

    def run(variant: str) -> tuple[int, float]:
        gc.collect()
        h0 = heap_bytes() or 0
        t0 = time.perf_counter()
        if variant == "every":
            for _ in torchmem.every(range(steps), n=10, empty_cache=False):
                _cyclic_step(x)
        else:
            for _ in range(steps):
                if variant == "scope":
                    with torchmem.scope():
                        _cyclic_step(x)
                else:
                    _cyclic_step(x)
                    if variant == "gc_each":
                        gc.collect()
        dt = (time.perf_counter() - t0) / steps
        grown = (heap_bytes() or 0) - h0
        gc.collect()
        return grown, dt

    variants = {"none": "no scope, no gc", "gc_each": "gc.collect() every step",
                "every": "torchmem.every(n=10)", "scope": "torchmem.scope() per step"}
    was = gc.isenabled()
    gc.disable()
    try:
        res: dict[str, list[tuple[int, float]]] = {k: [] for k in variants}
        for _ in range(rounds):
            for k in variants:
                res[k].append(run(k))
    finally:
        if was:
            gc.enable()
    for k, label in variants.items():
        grown = statistics.median(r[0] for r in res[k])
        ms = statistics.median(r[1] for r in res[k]) * 1e3
        print(f"{label:<28} {torchmem.format_bytes(grown):>12} {ms:>9.3f}")


def table_cleanup(rounds: int) -> None:
    print(f"\n3. torchmem.cleanup() cost vs live Python objects (median of {rounds})")
    base = len(gc.get_objects())
    print(f"tracked objects before: {base}")
    print(f"{'extra objects':>13} {'cleanup ms':>11} {'gc.collect ms':>14}")
    keep: list[Any] = []
    for target in (0, 300_000):
        keep.extend({"i": i} for i in range(target - len(keep)))
        c, g = [], []
        for _ in range(rounds):
            t0 = time.perf_counter()
            gc.collect()
            g.append(time.perf_counter() - t0)
            c.append(torchmem.cleanup().seconds)
        print(f"{target:>13} {statistics.median(c) * 1e3:>11.2f} {statistics.median(g) * 1e3:>14.2f}")
    del keep


def table_release(rounds: int) -> None:
    print(f"\n4. freeing a 16 MiB model held in a cycle (median of {rounds})")
    print(f"{'variant':<26} {'ms':>8} {'freed':>10}")
    res: dict[str, list[tuple[float, int]]] = {"release": [], "gc": []}
    was = gc.isenabled()
    gc.disable()
    try:
        for _ in range(rounds):
            for k in res:
                gc.collect()
                model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024, bias=False) for _ in range(4)])
                holder = _Node()
                holder.me, holder.model = holder, model
                h0 = heap_bytes() or 0
                t0 = time.perf_counter()
                if k == "release":
                    torchmem.release(model)
                    del model, holder
                else:
                    del model, holder
                    gc.collect()
                dt = time.perf_counter() - t0
                res[k].append((dt, h0 - (heap_bytes() or 0)))
    finally:
        if was:
            gc.enable()
    for k, label in (("release", "torchmem.release(model)"), ("gc", "del + gc.collect()")):
        ms = statistics.median(r[0] for r in res[k]) * 1e3
        freed = statistics.median(r[1] for r in res[k])
        print(f"{label:<26} {ms:>8.3f} {torchmem.format_bytes(freed):>10}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--threads", type=int, default=None,
                    help="torch intra-op threads (1 gives stable ratios on a busy machine)")
    ap.add_argument("--tables", default="0,1,2,3,4", help="which tables to print")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    with torchmem.scope():  # the first dispatch mode of a process imports torch._dynamo
        pass
    tables = {int(t) for t in args.tables.split(",")}
    if 0 in tables:
        table_micro(args.rounds)
    if 1 in tables:
        table_per_op(args.rounds, args.steps)
    if 2 in tables:
        table_cycles(args.rounds, args.steps)
    if 3 in tables:
        table_cleanup(args.rounds)
    if 4 in tables:
        table_release(args.rounds)


if __name__ == "__main__":
    main()
