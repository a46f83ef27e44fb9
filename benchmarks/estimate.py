"""How close ``torchmem.estimate()`` comes to the measured peak, and what it costs.

For each model, two training steps (forward, loss, backward, optimizer step) run for
real under the exact CPU ``Tracker`` (tensor-storage peak above the start), and the same
two steps are estimated on fake tensors. The table prints both peaks (the estimate
without the parameters, buffers and inputs that were already live when the tracker
started), their ratio, and the wall time of the real steps and of the estimate (median
of ``--rounds``, interleaved, same process).

A second table runs ``torchmem.plan_checkpoints()`` on a stack of MLP blocks at three
budgets and then the real steps with the plan applied (``torchmem.checkpointed``):
estimated vs measured peak, and the step time, which shows what recomputation costs.

Run:
    python benchmarks/estimate.py
    python benchmarks/estimate.py --rounds 3
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from typing import Any, Callable

import torch
from torch import nn
from torch.nn import functional as F

import torchmem
from torchmem.units import format_bytes


def _mean_square(out: Any, *_: Any) -> torch.Tensor:
    if isinstance(out, tuple):
        out = out[0]
    return out.pow(2).mean()


def workloads() -> list[tuple[str, Callable[[], nn.Module], tuple[int, ...], bool, Any]]:
    return [
        ("MLP 512-1024-1024-10, Adam", lambda: nn.Sequential(
            nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
            nn.Linear(1024, 10)), (128, 512), True, torch.optim.Adam),
        ("CNN conv-bn-relu x3, SGD", lambda: nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
            nn.Conv2d(64, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)),
         (32, 3, 32, 32), True, torch.optim.SGD),
        ("Transformer 4 layers d=256, AdamW", lambda: nn.TransformerEncoder(
            nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True), 4,
            enable_nested_tensor=False), (16, 64, 256), False, torch.optim.AdamW),
        ("LSTM 2 layers h=256, Adam", lambda: nn.LSTM(128, 256, 2, batch_first=True),
         (16, 50, 128), False, torch.optim.Adam),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, 2 steps each, "
          f"median of {args.rounds} rounds")
    print(f"{'workload':<36} {'measured':>11} {'estimated':>11} {'ratio':>6} "
          f"{'2 steps ms':>11} {'estimate ms':>12}")
    for name, make, shape, labels, opt_cls in workloads():
        torch.manual_seed(0)
        model = make()
        x = torch.randn(*shape)
        y = torch.randint(0, 10, (shape[0],)) if labels else None
        loss_fn = F.cross_entropy if labels else _mean_square
        real_s: list[float] = []
        est_s: list[float] = []
        measured = estimated = 0
        for _ in range(args.rounds):
            m = copy.deepcopy(model)
            opt = opt_cls(m.parameters(), lr=0.01)
            t0 = time.perf_counter()
            with torchmem.track("cpu") as t:
                for _ in range(2):
                    loss = loss_fn(m(x), y) if labels else loss_fn(m(x))
                    loss.backward()
                    opt.step()
                    opt.zero_grad()
                    del loss
            real_s.append(time.perf_counter() - t0)
            measured = t.peak_delta
            del m, opt
            t0 = time.perf_counter()
            est = torchmem.estimate(model, x, loss_fn=loss_fn, target=y,
                                    optimizer=opt_cls(model.parameters(), lr=0.01))
            est_s.append(time.perf_counter() - t0)
            estimated = est.peak_bytes - est.parameter_bytes - est.buffer_bytes - est.input_bytes
        print(f"{name:<36} {format_bytes(measured):>11} {format_bytes(estimated):>11} "
              f"{estimated / measured:>5.3f}x {statistics.median(real_s) * 1e3:>11.1f} "
              f"{statistics.median(est_s) * 1e3:>12.1f}")
    planner_table(args.rounds)
    return 0


class _Stack(nn.Module):
    def __init__(self, width: int = 512, blocks: int = 6) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))
            for _ in range(blocks)
        )
        self.head = nn.Linear(width, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = x + block(x)
        return self.head(x)


def planner_table(rounds: int) -> None:
    torch.manual_seed(0)
    model = _Stack()
    x, y = torch.randn(1024, 512), torch.randint(0, 10, (1024,))
    kw: dict[str, Any] = dict(loss_fn=F.cross_entropy, target=y)
    full = torchmem.estimate(model, x, **kw)
    every = torchmem.estimate(model, x, checkpoint=[f"blocks.{i}" for i in range(6)], **kw)
    static = full.parameter_bytes + full.input_bytes
    print(f"\nplan_checkpoints: 6 MLP blocks (512-2048-512), batch 1024, forward+backward "
          f"steps, peaks in total (parameters and inputs included), median of {rounds} rounds")
    print(f"{'budget':>10} {'checkpointed':>13} {'estimated':>11} {'measured':>11} "
          f"{'plan ms':>8} {'ms/step':>8}")
    for frac in (1.0, 0.5, 0.0):
        budget = every.peak_bytes + int((full.peak_bytes - every.peak_bytes) * frac)
        t0 = time.perf_counter()
        plan = torchmem.plan_checkpoints(model, x, budget=budget, **kw)
        plan_ms = (time.perf_counter() - t0) * 1e3
        step_s: list[float] = []
        measured = 0
        for _ in range(rounds):
            m = copy.deepcopy(model)
            t0 = time.perf_counter()
            with torchmem.checkpointed(m, plan.checkpoint), torchmem.track("cpu") as t:
                for _ in range(2):
                    loss = F.cross_entropy(m(x), y)
                    loss.backward()
                    m.zero_grad()
                    del loss
            step_s.append((time.perf_counter() - t0) / 2)
            measured = t.peak_delta
        print(f"{format_bytes(budget):>10} {len(plan.checkpoint):>13} "
              f"{format_bytes(plan.peak_after):>11} {format_bytes(measured + static):>11} "
              f"{plan_ms:>8.0f} {statistics.median(step_s) * 1e3:>8.1f}")


if __name__ == "__main__":
    raise SystemExit(main())
