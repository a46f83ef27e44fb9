# Source: https://github.com/pytorch/pytorch/issues/46386
# Adapted: torchvision's resnet152 replaced by a stack of Linear layers of about 4 MiB
#   (torchvision is not installed), `net.to('cuda:0')` -> cpu, 60 instances instead of 1000,
#   the print of the allocated memory replaced by a count of the instances still alive
#   (weak references), seeded.
import weakref

import torch
import torch.nn as nn


class LeakyModule(nn.Module):
    def __init__(self):
        super(LeakyModule, self).__init__()
        self.resnet = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 512))

        def fw_hook(m, m_in, m_out):
            self(m_in)

        self.register_forward_hook(fw_hook)


torch.manual_seed(0)
alive = []
for i in range(60):
    net = LeakyModule()
    net.to('cpu')
    alive.append(weakref.ref(net))
    if i % 20 == 0:
        print(f"{i}: {sum(r() is not None for r in alive)} modules alive")
print(sum(r() is not None for r in alive), "of", len(alive), "modules alive at the end")
