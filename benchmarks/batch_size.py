"""How many runs does ``torchmem.find_batch_size`` need, against doubling + bisection?

Both methods measure each run's peak the same way (``torchmem.track("cpu")``, exact
tensor bytes) against the same byte budget, and both certify their answer (``b`` fits,
``b + 1`` does not), so the certified answer of the baseline is the true maximum for a
step whose memory grows with the batch size. The table shows, per workload and budget:
the runs, the seconds to find the size (median of ``--reps``, the two methods
interleaved), the size found, and found / true maximum.

Workloads (CPU training steps, one thread):

* ``mlp-adam``: 512-1024-1024-10 MLP, forward, backward, Adam step (memory linear in
  the batch; Adam's moments appear at the first step, which the warmup absorbs).
* ``bucketed``: the same step with the batch padded to a multiple of 48 (memory is a
  staircase; the line through small probes is off and the search takes over).
* ``attention``: one ``scaled_dot_product_attention`` training step on
  ``[batch, 4, 128, 64]`` (activations of the attention matrix).

Usage:
    python benchmarks/batch_size.py            # about a minute
    python benchmarks/batch_size.py --reps 3
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

import torchmem
from torchmem.units import MiB, format_bytes

torch.set_num_threads(1)


def mlp_step(pad_to: int = 1) -> Callable[[int], None]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
        torch.nn.ReLU(), torch.nn.Linear(1024, 10),
    )
    opt = torch.optim.Adam(model.parameters())

    def step(bs: int) -> None:
        rows = -(-bs // pad_to) * pad_to
        x = torch.randn(rows, 512)
        model(x).square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def attention_step() -> Callable[[int], None]:
    torch.manual_seed(0)
    proj = torch.nn.Linear(64, 64 * 3)

    def step(bs: int) -> None:
        x = torch.randn(bs, 4, 128, 64)
        q, k, v = proj(x).chunk(3, dim=-1)
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        out.mean().backward()
        proj.zero_grad(set_to_none=True)

    return step


WORKLOADS: dict[str, tuple[Callable[[], Callable[[int], None]], list[int]]] = {
    "mlp-adam": (mlp_step, [32 * MiB, 64 * MiB]),
    "bucketed": (lambda: mlp_step(48), [64 * MiB]),
    "attention": (attention_step, [64 * MiB]),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    # warm the tracker's engine once, outside the timings
    torchmem.find_batch_size(lambda bs: torch.empty(bs), device="cpu", budget=10**6)
    header = ["workload", "budget", "method", "runs", "seconds", "found", "true max",
              "found/true", "fit slope B/sample", "r2"]
    rows = []
    for name, (make, budgets) in WORKLOADS.items():
        for budget in budgets:
            results: dict[str, list[torchmem.optimize.batch_size.BatchSizeResult]] = {
                "fit": [], "doubling": []
            }
            times: dict[str, list[float]] = {"fit": [], "doubling": []}
            for rep in range(args.reps):
                order = ["fit", "doubling"] if rep % 2 == 0 else ["doubling", "fit"]
                for method in order:
                    step = make()
                    t = time.perf_counter()
                    r = torchmem.find_batch_size(
                        step, device="cpu", budget=budget, method=method  # type: ignore[arg-type]
                    )
                    times[method].append(time.perf_counter() - t)
                    results[method].append(r)
            truth = results["doubling"][0].batch_size
            for method in ("doubling", "fit"):
                r = results[method][0]
                fit = r.fit
                rows.append([
                    name, format_bytes(budget), method if method == "fit" else "doubling+bisect",
                    str(r.runs), f"{statistics.median(times[method]):.2f}",
                    str(r.batch_size), str(truth), f"{r.batch_size / truth:.3f}",
                    f"{fit.slope:,.0f}" if fit else "", f"{fit.r2:.4f}" if fit else "",
                ])
                if method == "fit":
                    rows[-1][2] = f"fit ({r.method})"
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    print(f"torch {torch.__version__}, CPU, byte budget, median of {args.reps} interleaved runs")
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))


if __name__ == "__main__":
    main()
