# Source: https://github.com/pytorch/pytorch/issues/25605
# Adapted: main() kept as posted (`print(gc.get_referrers(optim))` dropped: it prints object
#   addresses); called 15 times, printing what gc.collect() returns every 5 calls; seeded.
import torch
from torch import nn

import gc

def main():
    param = nn.Parameter(torch.randn(10))

    optim = torch.optim.Adam([param])
    scheduler = torch.optim.lr_scheduler.LambdaLR(optim, lambda epoch: 1.0)
    del scheduler

    gc.collect()
    del optim
    return gc.collect()

if __name__ == '__main__':
    torch.manual_seed(0)
    for run in range(15):
        collected = main()
        if run % 5 == 0:
            print(run, collected)
