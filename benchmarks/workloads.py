"""Reference training loops for torchmem's overhead benchmarks.

Two loops bracket what users run:

* ``mlp``: a 3-layer MLP on 256x512 batches with Adam: few, large ops per step
  (about 2-4 ms per step on a laptop core).
* ``lstm_cell``: an ``LSTMCell`` unrolled over 40 time steps with batch 8 and hidden 32,
  plus a small head and SGD: hundreds of tiny ops per step, where any per-op or
  per-call instrumentation shows most.

Run as a script, a loop prints one JSON line with its per-step timing, measured inside the
loop (process start-up and imports excluded)::

    python benchmarks/workloads.py mlp --steps 300
    {"workload": "mlp", "steps": 300, "median_step_s": 0.0031, "total_s": 0.95}

so that ``python workloads.py`` and ``torchmem run workloads.py`` are compared on the
same footing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Callable

import torch

__all__ = ["mlp_loop", "lstm_cell_loop", "WORKLOADS", "time_loop"]


def mlp_loop(steps: int, on_step: Callable[[int], None] | None = None) -> list[float]:
    """Train a small MLP for ``steps`` steps; return per-step wall times."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(512, 512), torch.nn.ReLU(),
        torch.nn.Linear(512, 512), torch.nn.ReLU(),
        torch.nn.Linear(512, 10),
    )
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(256, 512)
    y = torch.randint(0, 10, (256,))
    times = []
    for i in range(steps):
        t = time.perf_counter()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if on_step is not None:
            on_step(i)
        times.append(time.perf_counter() - t)
    return times


def lstm_cell_loop(steps: int, on_step: Callable[[int], None] | None = None) -> list[float]:
    """Train an unrolled LSTMCell (many tiny ops) for ``steps`` steps; return step times."""
    torch.manual_seed(0)
    cell = torch.nn.LSTMCell(16, 32)
    head = torch.nn.Linear(32, 1)
    params = list(cell.parameters()) + list(head.parameters())
    opt = torch.optim.SGD(params, lr=1e-2)
    seq = torch.randn(40, 8, 16)
    target = torch.randn(8, 1)
    times = []
    for i in range(steps):
        t = time.perf_counter()
        h = torch.zeros(8, 32)
        c = torch.zeros(8, 32)
        for x in seq:
            h, c = cell(x, (h, c))
        loss = torch.nn.functional.mse_loss(head(h), target)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if on_step is not None:
            on_step(i)
        times.append(time.perf_counter() - t)
    return times


WORKLOADS: dict[str, Callable[..., list[float]]] = {"mlp": mlp_loop, "lstm_cell": lstm_cell_loop}


def time_loop(name: str, steps: int, warmup: int = 10) -> dict[str, float | int | str]:
    """Run a workload and summarise its step times (the first ``warmup`` steps dropped)."""
    times = WORKLOADS[name](steps + warmup)[warmup:]
    return {"workload": name, "steps": steps, "median_step_s": statistics.median(times),
            "total_s": sum(times)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", choices=sorted(WORKLOADS))
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads (default 1: stable timings)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(json.dumps(time_loop(args.workload, args.steps)))


if __name__ == "__main__":
    main()
