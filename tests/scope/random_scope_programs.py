"""Random training programs run with and without ``torchmem.scope``; results compared bit for bit.

Each program is drawn from building blocks real training code uses: micro-batch
gradient accumulation (into a pre-existing tensor in place, into kept tensors, or by a
backward pass per micro-batch), in-place updates of tensors created outside the scope
(with and without a graph, through views and item assignment), a gradient penalty
made with ``create_graph=True``, a custom autograd Function, tensor hooks whose closures hold scope
tensors, checkpointed blocks, saved-tensor hooks, in-place activations, optimizer steps
inside the scope, nested scopes and kept views. Every program follows the scope
contract (what is used after the scope is kept, or existed before it), so the scoped
run must give the same parameters, gradients and losses, bit for bit, and must not
raise. A crash of the process fails the calling test with the seed printed last.

Usage: ``python random_scope_programs.py --programs 150 --seed 0 [--engine dispatch]``
"""

from __future__ import annotations

import argparse
import contextlib
import random
import sys
import traceback
from typing import Any

import torch
from torch.utils.checkpoint import checkpoint

import torchmem


ENGINE = "calls"


def _model(rng: random.Random) -> torch.nn.Module:
    width = rng.choice([4, 8, 16])
    layers: list[torch.nn.Module] = [torch.nn.Linear(6, width)]
    for _ in range(rng.randint(0, 2)):
        layers.append(rng.choice([torch.nn.ReLU(), torch.nn.Tanh(), torch.nn.GELU(),
                                  torch.nn.LayerNorm(width), torch.nn.Dropout(0.0)]))
        layers.append(torch.nn.Linear(width, width))
    layers.append(torch.nn.Linear(width, 1))
    return torch.nn.Sequential(*layers)


def _program(seed: int, scoped: bool) -> list[torch.Tensor]:
    rng = random.Random(seed)
    torch.manual_seed(seed)
    model = _model(rng)
    opt = rng.choice([None, "sgd", "adam"])
    optim = (torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9) if opt == "sgd"
             else torch.optim.Adam(model.parameters(), lr=1e-2) if opt == "adam" else None)
    steps, micro = rng.randint(1, 3), rng.randint(1, 4)
    data = torch.randn(steps, micro, 5, 6)
    accumulate = rng.choice(["inplace_total", "kept_list", "backward_each", "rebound_total"])
    extras = {name for name in ("outside_view", "ema", "hook", "checkpoint", "save_on_cpu",
                                "inplace_act", "nested", "kept_view", "grad_penalty",
                                "setitem", "custom_fn") if rng.random() < 0.35}
    buf = torch.zeros(micro, 1)
    ema = torch.zeros(())
    log: list[torch.Tensor] = []

    def scope() -> Any:
        return torchmem.scope(engine=ENGINE) if scoped else _NoScope()

    for step in range(steps):
        if optim is not None:
            optim.zero_grad(set_to_none=True)
        else:
            model.zero_grad(set_to_none=True)
        total = torch.zeros(())
        kept: list[torch.Tensor] = []
        for i in range(micro):
            with scope() as s:
                x = data[step, i]
                if "checkpoint" in extras:
                    h = checkpoint(model[0], x * 1.0, use_reentrant=False)
                    h = model[1:](h)
                elif "save_on_cpu" in extras:
                    with torch.autograd.graph.save_on_cpu():
                        h = model(x)
                else:
                    h = model(x)
                if "inplace_act" in extras:
                    h = h * 1.0
                    h.tanh_()
                if "custom_fn" in extras:
                    h = _Square.apply(h)
                if "hook" in extras and h.requires_grad:
                    scale = torch.full_like(h, 0.5)
                    h.register_hook(lambda g, scale=scale: g * scale)
                if "nested" in extras:
                    with (torchmem.scope(engine=ENGINE) if scoped else _NoScope()) as inner:
                        h = inner.keep(h * 2 - h)
                loss = h.pow(2).mean() / micro
                if "grad_penalty" in extras:  # WGAN-GP: a create_graph=True gradient
                    point = (x * 0.5).requires_grad_(True)
                    g, = torch.autograd.grad(model(point).sum(), point, create_graph=True)
                    loss = loss + (g.norm(2, dim=1) - 1).pow(2).mean() / micro
                if "setitem" in extras:
                    buf[i] = h.mean() if accumulate != "backward_each" else h.mean().detach()
                if "outside_view" in extras:
                    row = buf[i]  # a view of a tensor made before the scope
                    row.add_(h.mean() if accumulate != "backward_each" else h.mean().detach())
                if "ema" in extras:
                    with torch.no_grad():
                        ema.mul_(0.9).add_(h.mean())
                if "kept_view" in extras:
                    log.append(s.keep(h[:1, :1].detach().clone()))
                if accumulate == "inplace_total":
                    total += loss
                elif accumulate == "kept_list":
                    kept.append(s.keep(loss))
                elif accumulate == "rebound_total":
                    total = s.keep(total + loss)
                else:
                    loss.backward()
                    log.append(s.keep(loss.detach().clone()))
        if accumulate == "kept_list":
            total = torch.stack(kept).sum()
        if "outside_view" in extras or "setitem" in extras:
            total = total + buf.sum()
            buf = torch.zeros(micro, 1)
        if accumulate != "backward_each":
            total.backward()
        log.append(total.detach().clone())
        if optim is not None:
            optim.step()
    out = [p.detach().clone() for p in model.parameters()]
    out += [p.grad.clone() for p in model.parameters() if p.grad is not None]
    return out + log + [ema.clone()]


class _Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return 2 * x * grad


class _NoScope(contextlib.nullcontext):
    def __enter__(self) -> "_NoScope":
        return self

    def keep(self, obj: Any) -> Any:
        return obj


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--programs", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--engine", default="calls", help="the scope engine to test")
    args = parser.parse_args(argv)
    global ENGINE
    ENGINE = args.engine
    mismatches = crashes = 0
    for k in range(args.programs):
        seed = args.seed * 100_000 + k
        print(f"program {seed}", flush=True)
        try:
            want = _program(seed, scoped=False)
            got = _program(seed, scoped=True)
        except Exception:  # noqa: BLE001 - every raise is a failure of torchmem
            crashes += 1
            print(f"  raised:\n{traceback.format_exc()}", flush=True)
            continue
        if len(want) != len(got) or not all(
            a.shape == b.shape and torch.equal(a, b) for a, b in zip(want, got)
        ):
            mismatches += 1
            print("  results differ", flush=True)
    print(f"programs {args.programs} mismatches {mismatches} crashes {crashes}")
    return 0 if mismatches == crashes == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
