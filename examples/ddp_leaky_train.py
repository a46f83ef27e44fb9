"""A data-parallel training script (DDP, gloo on the CPU) in which one rank leaks.

Every rank trains the same model; the ranks named by ``--leaky-ranks`` also validate
each step and keep the validation loss with its autograd graph, so their memory grows.
Run every rank under the doctor and get one report for every rank:

    torchrun --standalone --nproc-per-node 2 -m torchmem doctor --json run.json \\
        examples/ddp_leaky_train.py
"""

import argparse

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--leaky-ranks", default="1", help="comma-separated ranks that leak")
    args = parser.parse_args()
    leaky = {int(r) for r in args.leaky_ranks.split(",") if r}

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                              torch.nn.Linear(512, 10))
    model = DDP(net)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    val_losses = []
    for _ in range(args.steps):
        loss = model(torch.randn(256, 256)).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if rank in leaky:  # validation on this rank only, kept with its graph
            val_losses.append(net(torch.randn(256, 256)).square().mean())
    if rank == 0:
        print(f"trained {args.steps} steps on {dist.get_world_size()} ranks")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
