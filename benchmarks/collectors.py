"""Overhead of torchmem's collectors on CPU training loops, and the cost of a reading.

Prints three tables:

1. Loop overhead: seconds per run of an MLP training loop and of a small-op-heavy
   LSTM-cell loop, plain vs under ``torchmem.Monitor`` (default interval), under
   ``torchmem.track("cpu")`` (the storage engine), and two references: a no-op
   ``TorchDispatchMode`` and ``tracemalloc``. Runs are interleaved A/B/A/B within one
   process (the machine may be shared) and each figure is the median of ``--reps``.
2. The engine's cost per aten op, in microseconds, with a no-op mode for reference.
3. The Monitor's own CPU use: CPU time of its sampler thread per sample and as a share
   of one core (robust to other load on the machine, unlike wall-clock ratios).
4. The cost of one reading: ``heap_bytes``, ``rss_bytes``, ``read("cpu")`` and
   ``read("cpu", exact=True)``.

Usage:
    python benchmarks/collectors.py            # full run (about a minute or two)
    python benchmarks/collectors.py --reps 3   # quicker, noisier
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
import tracemalloc
from typing import Any, Callable, Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode

import torchmem
from torchmem.collect import cpu


class _NoopMode(TorchDispatchMode):
    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        return func(*args, **(kwargs or {}))


def mlp_loop(steps: int = 20) -> Callable[[], None]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
        torch.nn.ReLU(), torch.nn.Linear(1024, 10),
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(128, 512), torch.randint(0, 10, (128,))

    def run() -> None:
        for _ in range(steps):
            opt.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()

    return run


def lstm_cell_loop(steps: int = 4, seq: int = 30) -> Callable[[], None]:
    torch.manual_seed(0)
    cell = torch.nn.LSTMCell(32, 32)
    head = torch.nn.Linear(32, 1)
    opt = torch.optim.SGD(list(cell.parameters()) + list(head.parameters()), lr=0.01)
    xs = torch.randn(seq, 4, 32)

    def run() -> None:
        for _ in range(steps):
            opt.zero_grad(set_to_none=True)
            h = c = torch.zeros(4, 32)
            for t in range(seq):
                h, c = cell(xs[t], (h, c))
            head(h).sum().backward()
            opt.step()

    return run


@contextlib.contextmanager
def _plain() -> Iterator[None]:
    yield


@contextlib.contextmanager
def _monitor() -> Iterator[None]:
    with torchmem.Monitor(device="cpu"):
        yield


@contextlib.contextmanager
def _tracker() -> Iterator[None]:
    with torchmem.track("cpu"):
        yield


@contextlib.contextmanager
def _noop_mode() -> Iterator[None]:
    with _NoopMode():
        yield


@contextlib.contextmanager
def _tracemalloc() -> Iterator[None]:
    tracemalloc.start()
    try:
        yield
    finally:
        tracemalloc.stop()


@contextlib.contextmanager
def _monitor_steps() -> Iterator[None]:
    with torchmem.Monitor(interval=None, device="cpu") as m:
        m.step()  # one boundary reading per run (the runner would do one per step)
        yield


VARIANTS: dict[str, Callable[[], contextlib.AbstractContextManager[None]]] = {
    "plain": _plain,
    "Monitor (50 ms)": _monitor,
    "Monitor (interval=None)": _monitor_steps,
    "Tracker (engine)": _tracker,
    "no-op dispatch mode": _noop_mode,
    "tracemalloc": _tracemalloc,
}


def _time(
    run: Callable[[], None], ctx: Callable[[], contextlib.AbstractContextManager[None]]
) -> float:
    with ctx():
        start = time.perf_counter()
        run()
        return time.perf_counter() - start


def loop_table(reps: int) -> None:
    print("\n## Loop overhead (seconds per run, median of %d interleaved runs)\n" % reps)
    print("| loop | variant | median s | ratio to plain |")
    print("| --- | --- | ---: | ---: |")
    for name, make in (("MLP training", mlp_loop), ("LSTM-cell loop", lstm_cell_loop)):
        run = make()
        for ctx in VARIANTS.values():  # warm-up, every variant
            _time(run, ctx)
        times: dict[str, list[float]] = {v: [] for v in VARIANTS}
        for _ in range(reps):
            for variant, ctx in VARIANTS.items():  # A/B/A/B interleaving
                times[variant].append(_time(run, ctx))
        base = statistics.median(times["plain"])
        for variant, values in times.items():
            med = statistics.median(values)
            print(f"| {name} | {variant} | {med:.4f} | {med / base:.3f}x |")


def per_op_table(reps: int, n: int = 20000) -> None:
    x = torch.ones(16)

    def ops() -> None:
        for _ in range(n):
            torch.add(x, 1)  # one aten op, one new 64-byte storage, freed at once

    def inplace() -> None:
        for _ in range(n):
            x.add_(0)  # one aten op, no new storage

    print(f"\n## Cost per aten op (microseconds; median of {reps} runs of {n} ops)\n")
    print("| op | plain us | no-op mode us | Tracker us | Tracker - plain | Tracker - no-op mode |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for label, fn in (("torch.add(x, 1) (new storage)", ops), ("x.add_(0) (in place)", inplace)):
        results: dict[str, list[float]] = {"plain": [], "noop": [], "tracker": []}
        ctxs = {"plain": _plain, "noop": _noop_mode, "tracker": _tracker}
        for ctx in ctxs.values():
            _time(fn, ctx)
        for _ in range(reps):
            for key, ctx in ctxs.items():
                results[key].append(_time(fn, ctx) / n * 1e6)
        plain, noop, tracker = (statistics.median(results[k]) for k in ("plain", "noop", "tracker"))
        print(
            f"| {label} | {plain:.2f} | {noop:.2f} | {tracker:.2f} | {tracker - plain:.2f} "
            f"| {tracker - noop:.2f} |"
        )


def read_table(reps: int) -> None:
    model = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(20)])
    loss = model(torch.randn(32, 256)).sum()  # a live graph: exact reading walks it
    calls: list[tuple[str, Callable[[], Any], int]] = [
        ("cpu.heap_bytes()", cpu.heap_bytes, 2000),
        ("cpu.rss_bytes()", cpu.rss_bytes, 2000),
        ('read("cpu")', lambda: torchmem.read("cpu"), 2000),
        ('read("cpu", exact=True)', lambda: torchmem.read("cpu", exact=True), 3),
    ]
    print(f"\n## Cost of one reading (median of {reps} batches)\n")
    print("| call | us per call |")
    print("| --- | ---: |")
    for label, fn, n in calls:
        fn()
        values = []
        for _ in range(reps):
            start = time.perf_counter()
            for _ in range(n):
                fn()
            values.append((time.perf_counter() - start) / n * 1e6)
        print(f"| {label} | {statistics.median(values):,.1f} |")
    del loss


def monitor_cpu_table(seconds: float = 4.0) -> None:
    """CPU time the sampler thread itself uses: robust to a loaded machine."""
    run = mlp_loop(steps=2)
    print(f"\n## Monitor's own CPU use (sampler thread, {seconds:.0f} s of MLP training)\n")
    print("| interval | samples | sampler CPU ms | CPU us per sample | share of one core |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for interval in (0.05, 0.01):
        m = torchmem.Monitor(interval=interval, device="cpu").start()
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            run()
        timeline = m.stop()
        wall = time.perf_counter() - start
        cpu_s = m.sampler_cpu
        n = max(len(timeline) + timeline.dropped - 2, 1)  # the thread's samples only
        print(
            f"| {interval * 1000:.0f} ms | {n} | {cpu_s * 1000:.2f} | {cpu_s / n * 1e6:.0f} "
            f"| {cpu_s / wall:.3%} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=7, help="interleaved runs per variant (>= 5)")
    parser.add_argument(
        "--threads", type=int, default=0, help="torch intra-op threads (0: default)"
    )
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} intra-op thread(s), "
        f"torchmem {torchmem.__version__}"
    )
    loop_table(args.reps)
    monitor_cpu_table()
    per_op_table(args.reps)
    read_table(args.reps)


if __name__ == "__main__":
    main()
