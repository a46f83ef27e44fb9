# Source: https://github.com/pytorch/pytorch/issues/17630
# Adapted: the loop body kept as posted; nn.Linear(1000, 1000) instead of (5000, 5000),
#   `.cuda()` dropped (cpu), `args.patience` -> 10 (the reporter's argument parser is not in
#   the issue) and `verbose=True` dropped (deprecated and printing nothing useful here);
#   `while True` -> 150 models, printing every 25; seeded.
import torch

torch.manual_seed(0)
i = 0
while i < 150:
        net = torch.nn.Linear(1000,1000)
        net = net
        optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
        scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau( optimizer,
                'max', patience=10, factor=0.5)
        # scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=30,
        #         gamma=0.1)
        if i % 25 == 0:
            print(i)
        i += 1
