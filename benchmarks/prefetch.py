"""Does ``torchmem.prefetch`` overlap loading with compute? Serial vs prefetch vs DataLoader.

Each scenario has a producer (T_load per batch) and a consumer (T_compute per batch).
For N batches the ideal pipeline takes ``N * max(T_load, T_compute) + min(T_load,
T_compute)`` (the last term fills the pipeline); serial takes ``N * (T_load +
T_compute)``. The table shows seconds per run and the ratio to the ideal (1.00 = perfect
overlap) for:

* serial: ``for i in range(N): batch = load(i); compute(batch)``
* thread+Queue: the seed's pattern, a thread feeding ``Queue(maxsize=1)`` (reference for
  what a plain thread double buffer reaches; it has no shutdown or error handling)
* ``torchmem.prefetch(..., depth=2)`` and ``depth=3`` (a background thread)
* ``DataLoader(dataset, batch_size=None, num_workers=2, persistent_workers=True)``
  (worker processes), timed on warm workers: starting them (about 0.1-0.5 s here) is
  left out, as it is paid once per run with persistent workers

Scenarios (``producer / consumer``). T_load and T_compute are measured alone (N loads,
N computes) in the same interleaved rounds, so the ideal sees the same machine load. Simulated ("sim:") rows have a consumer that waits (``time.sleep``: a host
waiting on a GPU step) and are stable on a shared machine; the others compute for real:

* ``io``: the producer waits on I/O (``time.sleep``: disk, network).
* ``python``: the producer is pure-Python computation (holds the GIL).
* ``torch decode``: ``torch.load`` of a uint8 image batch from a file, then conversion
  and resizing with torch ops (which release the GIL).
* ``wait``/``slow wait``: the consumer waits 10 ms / 20 ms; ``matmul``: the consumer
  multiplies matrices for about 10 ms on one thread.

On a CUDA machine a second table measures host-to-device copies: the card's copy peak
(best pinned copy), what pageable copies reach, what ``prefetch`` reaches from pageable
and from pinned sources, and the overlap of copies with compute.

Runs are interleaved (serial, depth 2, depth 3, DataLoader, with the order rotating
each round) and each figure is the median of ``--reps`` rounds.

Usage:
    python benchmarks/prefetch.py              # about a minute on 2 cores
    python benchmarks/prefetch.py --reps 7 --batches 40
"""

from __future__ import annotations

import argparse
import os
import queue
import statistics
import threading
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset

import torchmem

torch.set_num_threads(1)  # one core for the consumer, one for the producer


# -- producers and consumers (module level: DataLoader workers must pickle them) ------
def _calibrate_spin(target: float) -> int:
    n = 20_000
    while True:
        t = time.perf_counter()
        _spin(n)
        took = time.perf_counter() - t
        if took > 0.05:
            return max(1, int(n * target / took))
        n *= 2


def _spin(n: int) -> int:
    acc = 0
    for i in range(n):
        acc += i * i % 7
    return acc


class SleepLoad:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __call__(self, i: int) -> torch.Tensor:
        time.sleep(self.seconds)
        return torch.full((64, 64), float(i))


class PythonLoad:
    def __init__(self, spins: int) -> None:
        self.spins = spins

    def __call__(self, i: int) -> torch.Tensor:
        _spin(self.spins)
        return torch.full((64, 64), float(i))


class DecodeLoad:
    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self, i: int) -> torch.Tensor:
        raw = torch.load(self.path, weights_only=True)  # uint8 [B, 3, H, W]
        x = raw.float().div_(255)
        return torch.nn.functional.interpolate(x, scale_factor=0.5, mode="bilinear")


class SleepCompute:
    """Stands for device work the host waits on (a GPU step), or for I/O-bound use."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __call__(self, batch: torch.Tensor) -> None:
        time.sleep(self.seconds)


class MatmulCompute:
    def __init__(self, size: int, repeats: int) -> None:
        torch.manual_seed(0)
        self.a = torch.randn(size, size)
        self.repeats = repeats

    def __call__(self, batch: torch.Tensor) -> float:
        y = self.a
        for _ in range(self.repeats):
            y = torch.tanh(y @ self.a)
        return float(y[0, 0]) + float(batch.flatten()[0])


class _Items(Dataset):  # type: ignore[type-arg]
    def __init__(self, load: Callable[[int], Any], n: int) -> None:
        self.load = load
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> Any:
        return self.load(i)


def _calibrate_compute(target: float) -> MatmulCompute:
    size, repeats = 256, 1
    while True:
        c = MatmulCompute(size, repeats)
        took = _median_time(lambda: c(torch.zeros(1)), 3)
        if took >= target * 0.9:
            return c
        repeats = max(repeats + 1, int(repeats * target / max(took, 1e-6)))


def _median_time(fn: Callable[[], Any], reps: int) -> float:
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


# -- methods -------------------------------------------------------------------------
def _source(load: Callable[[int], Any], n: int) -> Iterator[Any]:
    for i in range(n):
        yield load(i)


def run_serial(load: Callable[[int], Any], compute: Callable[[Any], Any], n: int) -> None:
    for batch in _source(load, n):
        compute(batch)


def run_prefetch(depth: int) -> Callable[..., None]:
    def run(load: Callable[[int], Any], compute: Callable[[Any], Any], n: int) -> None:
        for batch in torchmem.prefetch(_source(load, n), depth=depth):
            compute(batch)

    return run


def run_thread_queue(load: Callable[[int], Any], compute: Callable[[Any], Any], n: int) -> None:
    """The seed's pattern: a thread and ``Queue(maxsize=1)`` (no shutdown, no errors)."""
    q: queue.Queue[Any] = queue.Queue(maxsize=1)

    def work() -> None:
        for batch in _source(load, n):
            q.put(batch)
        q.put(None)

    threading.Thread(target=work, daemon=True).start()
    while (batch := q.get()) is not None:
        compute(batch)


METHODS: dict[str, Callable[..., None]] = {
    "serial": run_serial,
    "thread+Queue": run_thread_queue,
    "prefetch d=2": run_prefetch(2),
    "prefetch d=3": run_prefetch(3),
}


def bench_cpu(reps: int, n: int, t_fast: float, t_slow: float, tmp: str) -> list[list[str]]:
    image = torch.randint(0, 256, (16, 3, 128, 128), dtype=torch.uint8)
    path = os.path.join(tmp, "batch.pt")
    torch.save(image, path)
    matmul = _calibrate_compute(t_fast)
    python = PythonLoad(_calibrate_spin(t_slow))
    scenarios = {
        "sim: io / wait": (SleepLoad(t_slow), SleepCompute(t_fast)),
        "sim: io / slow wait": (SleepLoad(t_fast), SleepCompute(t_slow)),
        "sim: python / wait": (python, SleepCompute(t_fast)),
        "io / matmul": (SleepLoad(t_slow), matmul),
        "python / matmul": (python, matmul),
        "torch decode / matmul": (DecodeLoad(path), matmul),
    }
    rows = []
    for name, (load, comp) in scenarios.items():
        loader = DataLoader(_Items(load, n), batch_size=None, num_workers=2,
                            persistent_workers=True)
        for _ in loader:  # start the workers outside the timings
            pass
        methods: dict[str, Callable[[], Any]] = {
            "load only": lambda: [load(i) for i in range(n)],
            "compute only": lambda: [comp(torch.zeros(1)) for _ in range(n)],
            **{m: (lambda f=f: f(load, comp, n)) for m, f in METHODS.items()},
            "DataLoader w=2": lambda: [comp(b) for b in loader],
        }
        times: dict[str, list[float]] = {m: [] for m in methods}
        order = list(methods)
        for rep in range(reps):
            for m in order[rep % len(order):] + order[: rep % len(order)]:
                t = time.perf_counter()
                methods[m]()
                times[m].append(time.perf_counter() - t)
        total_load = statistics.median(times["load only"])
        total_comp = statistics.median(times["compute only"])
        ideal = max(total_load, total_comp) + min(total_load, total_comp) / n
        row = [name, f"{total_load / n * 1e3:.1f}", f"{total_comp / n * 1e3:.1f}", f"{ideal:.3f}"]
        for m in order[2:]:
            med = statistics.median(times[m])
            row.append(f"{med:.3f} ({med / ideal:.2f}x)")
        rows.append(row)
        del loader
    return rows


def bench_cuda(reps: int) -> list[list[str]]:
    dev = torch.device("cuda")
    nbytes = 256 << 20
    pageable = torch.empty(nbytes // 4)
    pinned = pageable.pin_memory()

    def copy_rate(src: torch.Tensor) -> float:
        rates = []
        for _ in range(reps):
            torch.cuda.synchronize()
            t = time.perf_counter()
            src.to(dev, non_blocking=True)
            torch.cuda.synchronize()
            rates.append(nbytes / (time.perf_counter() - t))
        return max(rates)

    peak = copy_rate(pinned)
    page = copy_rate(pageable)
    rows = [["pinned copy (peak)", f"{peak / 1e9:.1f}", "1.00"],
            ["pageable copy", f"{page / 1e9:.1f}", f"{page / peak:.2f}"]]
    batch_elems = (64 << 20) // 4
    n = 16
    for label, make in (
        ("prefetch, pageable source", lambda: torch.empty(batch_elems)),
        ("prefetch, pinned source", lambda: torch.empty(batch_elems, pin_memory=True)),
    ):
        batches = [make() for _ in range(n)]
        rates = []
        for _ in range(reps):
            torch.cuda.synchronize()
            t = time.perf_counter()
            for x in torchmem.prefetch(batches, dev, depth=3):
                pass
            torch.cuda.synchronize()
            rates.append(n * batch_elems * 4 / (time.perf_counter() - t))
        rate = statistics.median(rates)
        rows.append([label, f"{rate / 1e9:.1f}", f"{rate / peak:.2f}"])
    # overlap of copies with compute: kernels about as long as one copy
    a = torch.randn(4096, 4096, device=dev)
    host = [torch.empty(batch_elems, pin_memory=True) for _ in range(n)]
    torch.cuda.synchronize()
    t = time.perf_counter()
    host[0].to(dev, non_blocking=True)
    torch.cuda.synchronize()
    t_copy = time.perf_counter() - t
    k = 1
    while True:
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(k):
            a @ a
        torch.cuda.synchronize()
        if time.perf_counter() - t >= t_copy:
            break
        k *= 2

    def compute(x: torch.Tensor) -> None:
        for _ in range(k):
            a @ a

    def serial() -> None:
        for h in host:
            compute(h.to(dev, non_blocking=True))
        torch.cuda.synchronize()

    def prefetched() -> None:
        for x in torchmem.prefetch(host, dev, depth=2):
            compute(x)
        torch.cuda.synchronize()

    ts, tp = [], []
    for _ in range(reps):
        for fn, acc in ((serial, ts), (prefetched, tp)):
            t = time.perf_counter()
            fn()
            acc.append(time.perf_counter() - t)
    s, p = statistics.median(ts), statistics.median(tp)
    overlap = (s - p) / (n * t_copy) if t_copy > 0 else 0.0
    rows.append(["copy+compute serial (s)", f"{s:.3f}", ""])
    rows.append(["copy+compute prefetch (s)", f"{p:.3f}", f"overlap {overlap:.0%} of copy time"])
    return rows


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--fast-ms", type=float, default=10.0)
    parser.add_argument("--slow-ms", type=float, default=20.0)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, {args.batches} batches, "
          f"median of {args.reps} interleaved runs")
    with tempfile.TemporaryDirectory() as tmp:
        rows = bench_cpu(args.reps, args.batches, args.fast_ms / 1e3, args.slow_ms / 1e3, tmp)
    print(_table(
        ["scenario", "T_load ms", "T_comp ms", "ideal s", *METHODS, "DataLoader w=2"], rows
    ))
    if torch.cuda.is_available():
        print()
        print(f"CUDA: {torch.cuda.get_device_name()}")
        print(_table(["host-to-device", "GB/s", "of peak"], bench_cuda(args.reps)))
    else:
        print("\n(no CUDA device: host-to-device table skipped)")


if __name__ == "__main__":
    main()
