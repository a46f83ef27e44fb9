"""Cost of ``torchmem.census()`` and ``live_tensor_bytes()`` versus a plain gc-scan census.

Two scenarios, each in its own fresh process (the number of gc objects matters):

    loose   N small loose tensors (default 100 000) and nothing else
    model   the same, plus a 50-layer MLP trained one step with Adam (150 parameters,
            gradients, 300 optimizer-state tensors) and a pending autograd graph

Every variant of a scenario runs in the same process, interleaved per round; the table
shows the median of the rounds as wall time and as this thread's CPU time
(``time.thread_time``; steadier on a machine shared with other work), each also as a
ratio to the plain census of the same run.

Variants:
    gc listing       ``gc.get_objects()`` alone, and freeing its list: the floor of any
                     gc-based census
    bare scan        ``[o for o in gc.get_objects() if isinstance(o, torch.Tensor)]``
    plain census     the usual gc-scan census: dedupe by storage, sum ``nbytes``
    live bytes       ``torchmem.collect.live.live_tensor_bytes()`` (+ gradients, graphs)
    census           ``torchmem.census()``: roles, names (modules and optimizers found
                     by the scan), groups, pinning views, graphs
    census, owners   ``torchmem.census(modules=..., optimizers=...)``: owners given
    census, no C     ``torchmem.census()`` with the pure-Python class pass, as built
                     without a C compiler

Run:
    python benchmarks/census.py                      # both scenarios, N=100000, 7 rounds
    python benchmarks/census.py --scenario model --tensors 10000 --rounds 9
"""

from __future__ import annotations

import argparse
import gc
import statistics
import subprocess
import sys
import time
import warnings
from typing import Any, Callable

import psutil
import torch

import torchmem
from torchmem.collect import live


def gc_listing() -> int:
    return len(gc.get_objects())


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


def build(scenario: str, n: int) -> dict[str, Any]:
    state: dict[str, Any] = {"loose": [torch.randn(4) for _ in range(n)]}
    if scenario == "model":
        model = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(50)])
        opt = torch.optim.Adam(model.parameters())
        model(torch.randn(8, 64)).sum().backward()
        opt.step()
        state.update(model=model, opt=opt, pending=model(torch.randn(8, 64)).sum())
    return state


def python_pass_census() -> Any:
    fast = live.classify
    live.classify = live._classify_py
    try:
        return torchmem.census()
    finally:
        live.classify = fast


def run(scenario: str, n: int, rounds: int) -> None:
    warnings.simplefilter("ignore")  # isinstance() on deprecated torch objects warns
    state = build(scenario, n)
    modules = [state["model"]] if "model" in state else []
    optimizers = [state["opt"]] if "opt" in state else []
    variants: list[tuple[str, Callable[[], Any]]] = [
        ("gc listing", gc_listing),
        ("bare scan", bare_scan),
        ("plain census", plain_census),
        ("live bytes", live.live_tensor_bytes),
        ("census", torchmem.census),
        ("census, owners", lambda: torchmem.census(modules=modules, optimizers=optimizers)),
        ("census, no C", python_pass_census),
    ]
    times: dict[str, list[float]] = {name: [] for name, _ in variants}
    cpu: dict[str, list[float]] = {name: [] for name, _ in variants}
    # the first census gives every live storage a Python object torch then keeps
    gc.collect()
    objects_before, rss_before = len(gc.get_objects()), psutil.Process().memory_info().rss
    torchmem.census()  # (also warms one-time probes and imports)
    gc.collect()
    kept = len(gc.get_objects()) - objects_before
    kept_rss = psutil.Process().memory_info().rss - rss_before
    for _ in range(rounds):
        for name, fn in variants:
            c0 = time.thread_time()
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
            cpu[name].append(time.thread_time() - c0)
    objects = len(gc.get_objects())
    c = torchmem.census()
    accel = "C" if live.classify is not live._classify_py else "Python (no C accelerator built)"
    print(
        f"\nscenario {scenario}: python {sys.version.split()[0]}, torch {torch.__version__}; "
        f"gc objects={objects}, tensors seen={c.tensors_seen}, storages={c.n_storages}, "
        f"graph nodes={c.graph_nodes}, rounds={rounds}, class pass: {accel}"
    )
    base = statistics.median(times["plain census"])
    base_cpu = statistics.median(cpu["plain census"])
    print(f"the first census left {kept} more gc objects (storage objects torch keeps) and "
          f"{kept_rss / max(kept, 1):.0f} bytes of RSS each")
    print(f"{'variant':<15} {'wall median ms':>15} {'ratio':>6} {'cpu median ms':>14} {'ratio':>6}")
    for name, _ in variants:
        med = statistics.median(times[name])
        med_cpu = statistics.median(cpu[name])
        print(
            f"{name:<15} {med * 1e3:>15.1f} {med / base:>5.2f}x {med_cpu * 1e3:>14.1f} "
            f"{med_cpu / base_cpu:>5.2f}x"
        )
    assert c.total_bytes >= plain_census() - 64  # same storages (+ graph-only ones)
    del state


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", choices=("both", "loose", "model"), default="both")
    parser.add_argument("--tensors", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    if args.scenario != "both":
        run(args.scenario, args.tensors, args.rounds)
        return 0
    for scenario in ("loose", "model"):  # a fresh process each: gc object counts differ
        cmd = [sys.executable, __file__, "--scenario", scenario,
               "--tensors", str(args.tensors), "--rounds", str(args.rounds)]
        code = subprocess.call(cmd)
        if code:
            return code
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
