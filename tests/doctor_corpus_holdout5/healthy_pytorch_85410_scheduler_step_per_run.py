# Source: https://github.com/pytorch/pytorch/issues/85410
# Adapted: main() kept as posted; the reporter's check (gc.set_debug(gc.DEBUG_SAVEALL), one
#   call, then objgraph on gc.garbage) replaced by 300 calls of main() printing the number of
#   objects gc.collect() finds every 50 calls (objgraph is not installed); seeded.
import gc
import torch
from torch.nn import Linear
from torch.optim import Adam
from torch.optim.lr_scheduler import MultiStepLR


def main():
    t = torch.randn(100, 100)
    model = Linear(100, 100)

    optimizer = Adam(params=model.parameters())
    scheduler = MultiStepLR(optimizer=optimizer, milestones=[1, 2, 3])
    t = model(t)
    t.sum().backward()
    optimizer.step()
    scheduler.step()


if __name__ == '__main__':
    torch.manual_seed(0)
    gc.enable()
    for run in range(300):
        main()
        if run % 50 == 0:
            print(run, "garbage:", gc.collect())
