"""Cost of ``torchmem.census()`` and ``live_tensor_bytes()`` versus a plain gc-scan census.

Scenario: a process holding N small loose tensors (default 100 000) plus a 50-layer MLP
trained one step with Adam (150 parameters, gradients and 300 optimizer-state tensors)
and a pending autograd graph. Every variant runs in the same process, interleaved
A/B/C/D per round, and the table shows the median of the rounds, as wall time and as this thread's CPU
time (``time.thread_time``; steadier on a machine shared with other work), each also as
a ratio to the plain census.

Variants:
    bare scan      ``[o for o in gc.get_objects() if isinstance(o, torch.Tensor)]``
    plain census   the usual gc-scan census: dedupe by storage, sum ``nbytes``
    live bytes     ``torchmem.collect.live.live_tensor_bytes()`` (+ gradients, graphs)
    census         ``torchmem.census()`` (roles, names, groups, pinning views, graphs)

Run:
    python benchmarks/census.py                 # N=100000, 7 rounds
    python benchmarks/census.py --tensors 10000 --rounds 9
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
import warnings
from typing import Any, Callable

import torch

import torchmem
from torchmem.collect.live import live_tensor_bytes


def bare_scan() -> int:
    return len([o for o in gc.get_objects() if isinstance(o, torch.Tensor)])


def plain_census() -> int:
    seen: dict[int, int] = {}
    for o in gc.get_objects():
        if isinstance(o, torch.Tensor):
            s = o.untyped_storage()
            key = s._cdata
            if key not in seen:
                seen[key] = s.nbytes()
    return sum(seen.values())


def build(n: int) -> dict[str, Any]:
    loose = [torch.randn(4) for _ in range(n)]
    model = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(50)])
    opt = torch.optim.Adam(model.parameters())
    model(torch.randn(8, 64)).sum().backward()
    opt.step()
    pending = model(torch.randn(8, 64)).sum()  # graph with saved activations
    return {"loose": loose, "model": model, "opt": opt, "pending": pending}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tensors", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")  # isinstance() on deprecated torch objects warns
    state = build(args.tensors)
    variants: list[tuple[str, Callable[[], Any]]] = [
        ("bare scan", bare_scan),
        ("plain census", plain_census),
        ("live bytes", live_tensor_bytes),
        ("census", torchmem.census),
    ]
    times: dict[str, list[float]] = {name: [] for name, _ in variants}
    cpu: dict[str, list[float]] = {name: [] for name, _ in variants}
    for _ in range(args.rounds):
        for name, fn in variants:
            c0 = time.thread_time()
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
            cpu[name].append(time.thread_time() - c0)
    objects = len(gc.get_objects())
    tensors = bare_scan()
    c = torchmem.census()
    base = statistics.median(times["plain census"])
    base_cpu = statistics.median(cpu["plain census"])
    print(
        f"python {sys.version.split()[0]}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads; gc objects={objects}, tensors={tensors}, "
        f"storages={c.n_storages}, graph nodes={c.graph_nodes}, rounds={args.rounds}"
    )
    print(
        f"{'variant':<14} {'wall median ms':>15} {'ratio':>6} {'cpu median ms':>14} {'ratio':>6}"
    )
    for name, _ in variants:
        med = statistics.median(times[name])
        med_cpu = statistics.median(cpu[name])
        print(
            f"{name:<14} {med * 1e3:>15.1f} {med / base:>5.2f}x {med_cpu * 1e3:>14.1f} "
            f"{med_cpu / base_cpu:>5.2f}x"
        )
    assert c.total_bytes >= plain_census() - 64  # same storages (+ graph-only ones)
    del state
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
