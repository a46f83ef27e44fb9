# Source: https://github.com/pytorch/pytorch/issues/46386
# Adapted: torchvision's resnet152 replaced by four nn.Linear(512, 512) layers (torchvision
#   is not available), net.to('cuda:0') -> net.to('cpu'), 60 iterations instead of 1000,
#   the memory print replaced by the iteration number.
import torch
import torch.nn as nn

class LeakyModule(nn.Module):
    def __init__(self):
        super(LeakyModule, self).__init__()
        self.resnet = nn.Sequential(*[nn.Linear(512, 512) for _ in range(4)])

        def fw_hook(m, m_in, m_out):
            self(m_in)

        self.register_forward_hook(fw_hook)

for i in range(60):
    net = LeakyModule()
    net.to('cpu')
    print(f"{i}")
