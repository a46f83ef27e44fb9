"""Cost of ``torchmem.track()`` around one training step, exact and not.

Prints one table per step (the MLP training step and the LSTM-cell step of
``benchmarks/collectors.py``, one step each): the median wall time of one step

* bare;
* under a no-op ``TorchDispatchMode`` (the floor of any per-op Python engine);
* inside ``torchmem.track("cpu")``;
* inside ``torchmem.track("cpu", exact=True)``;
* with two ``read("cpu", exact=True)`` censuses around it (what an exact tracker cost
  before it kept a ledger of live storages);

and each one's ratio to the bare step. A last table gives the cost of what an exact
tracker does on entry: the full scan of live tensors (the first time) and the scan of
young gc generations (after that), in milliseconds. Every variant wraps each step on its own, the
variants run interleaved (A/B/C/D/E, A/B/C/D/E...) in one process, so a machine shared
with other work slows them alike, and each figure is the median of ``--rounds`` rounds
of ``--steps`` steps. Usage::

    python benchmarks/track.py [--rounds 7] [--steps 5] [--threads 1]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from typing import Any, Callable, Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torchmem  # noqa: E402
from collectors import lstm_cell_loop, mlp_loop  # noqa: E402


class _NoopMode(TorchDispatchMode):
    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def _bare() -> Iterator[None]:
    yield


@contextlib.contextmanager
def _two_censuses() -> Iterator[None]:
    torchmem.read("cpu", exact=True)
    yield
    torchmem.read("cpu", exact=True)


VARIANTS: dict[str, Callable[[], contextlib.AbstractContextManager[Any]]] = {
    "bare step": _bare,
    "no-op dispatch mode": _NoopMode,
    "track()": lambda: torchmem.track("cpu"),
    "track(exact=True)": lambda: torchmem.track("cpu", exact=True),
    "two read(exact=True)": _two_censuses,
}


def _round(step: Callable[[], None], ctx: Callable[[], Any], steps: int) -> float:
    total = 0.0
    for _ in range(steps):
        start = time.perf_counter()
        with ctx():
            step()
        total += time.perf_counter() - start
    return total / steps


def table(name: str, step: Callable[[], None], rounds: int, steps: int) -> None:
    for ctx in VARIANTS.values():  # warm-up: first-use costs stay out of the figures
        _round(step, ctx, 2)
    times: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for _ in range(rounds):
        for variant, ctx in VARIANTS.items():
            times[variant].append(_round(step, ctx, steps))
    base = statistics.median(times["bare step"])
    print(f"\n{name}: median of {rounds} interleaved rounds of {steps} steps\n")
    print("| variant | ms per step | ratio to bare |")
    print("| --- | ---: | ---: |")
    for variant, values in times.items():
        med = statistics.median(values)
        print(f"| {variant} | {med * 1e3:.2f} | {med / base:.2f}x |")


def sync_table(rounds: int) -> None:
    from torchmem.collect import _ledger
    from torchmem.collect._engine import engine

    model = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(20)])
    opt = torch.optim.Adam(model.parameters())
    model(torch.randn(8, 256)).sum().backward()
    opt.step()
    costs: dict[str, list[float]] = {"full": [], "young": []}
    known = 0
    for _ in range(rounds):
        engine.forget("cpu")
        for _ in range(2):  # the first call scans everything, the second the young objects
            start = time.perf_counter()
            how = _ledger.sync(engine, "cpu")
            costs[how].append(time.perf_counter() - start)
            _ledger.ended(engine, "cpu")  # what the end of an exact region does
        known = engine.tracked
    engine.forget("cpu")
    print(f"\nEntry scan of an exact tracker ({known} live storages, 20 Linear(256, 256) "
          f"+ Adam alive): median of {rounds}\n")
    print("| scan | ms |")
    print("| --- | ---: |")
    for how, values in costs.items():
        if values:
            print(f"| {how} | {statistics.median(values) * 1e3:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds per variant")
    parser.add_argument("--steps", type=int, default=5, help="steps per round")
    parser.add_argument(
        "--threads", type=int, default=0, help="torch intra-op threads (0: default)"
    )
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} intra-op thread(s), "
        f"torchmem {torchmem.__version__}, Python {sys.version.split()[0]}"
    )
    table("MLP training step (512-1024-1024-10, batch 128, SGD)", mlp_loop(steps=1),
          args.rounds, args.steps)
    table("LSTM-cell step (32 units, 30 time steps, batch 4, SGD)", lstm_cell_loop(steps=1),
          args.rounds, args.steps)
    sync_table(args.rounds)


if __name__ == "__main__":
    main()
