"""Plan a training step's memory before running it, then fit it into a budget.

    python examples/plan_memory.py

A 0.9-billion-parameter model is built on the ``meta`` device (no memory), its training
step with AdamW is estimated on fake tensors, and a smaller model's step is fitted into
a budget with activation checkpointing. Nothing here allocates the tensors it talks
about; it runs in seconds on a laptop CPU.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

import torchmem
from torchmem.units import format_bytes


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.mlp(self.norm(x))


class Net(nn.Module):
    def __init__(self, width: int, depth: int, vocab: int = 32000) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.blocks = nn.ModuleList(Block(width) for _ in range(depth))
        self.head = nn.Linear(width, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def lm_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.flatten(0, 1), target.flatten())


def main() -> None:
    # 1. A model too big for this machine: build it on "meta" and estimate its step.
    with torch.device("meta"):
        big = Net(width=2048, depth=24)
    tokens = torch.zeros(8, 512, dtype=torch.long, device="meta")
    est = torchmem.estimate(big, tokens, loss_fn=lm_loss, target=tokens,
                            optimizer=torch.optim.AdamW(big.parameters()))
    print(est)
    for part, nbytes in est.breakdown().items():
        print(f"  {part:<16} {format_bytes(nbytes):>10}")
    print("  largest activations:",
          ", ".join(f"{m.name or '(model)'} {format_bytes(m.retained_bytes)}"
                    for m in est.modules[:3]))

    # 2. Fit a smaller model's step into a budget with activation checkpointing.
    torch.manual_seed(0)
    model = Net(width=256, depth=8, vocab=1000)
    tokens = torch.randint(0, 1000, (16, 256))
    step = dict(loss_fn=lm_loss, target=tokens, optimizer=torch.optim.AdamW(model.parameters()))
    before = torchmem.estimate(model, tokens, **step)
    plan = torchmem.plan_checkpoints(model, tokens, budget=int(before.peak_bytes * 0.8), **step)
    print(plan)

    # 3. Run it for real with the plan and check the estimate.
    optimizer = torch.optim.AdamW(model.parameters())
    with torchmem.checkpointed(model, plan.checkpoint), torchmem.track("cpu") as t:
        for _ in range(2):
            lm_loss(model(tokens), tokens).backward()
            optimizer.step()
            optimizer.zero_grad()
    static = before.parameter_bytes + before.input_bytes
    print(f"measured peak {format_bytes(t.peak_delta + static)} "
          f"(planned {format_bytes(plan.peak_after)})")


if __name__ == "__main__":
    main()
