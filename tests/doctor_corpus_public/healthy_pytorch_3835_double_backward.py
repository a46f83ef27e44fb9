# Source: https://github.com/pytorch/pytorch/issues/3835
# Adapted: 1024 iterations instead of an endless loop (gc and a print every 256, not 512),
#   torch.Tensor(2,1,1,1) (uninitialised) -> torch.rand(2,1,1,1), seeded, grad_out of the
#   output's shape (2, 1) instead of (2, 1, 1, 1) (a shape mismatch is an error today).
import gc
import resource
import torch
from torch import nn, autograd
from torch.autograd import Variable

class Network(nn.Module):
    def __init__(self):
        super(Network, self).__init__()
        self.main = nn.Sequential(
            nn.Conv2d(1, 1, 1, 1),
            nn.Conv2d(1, 1, 1, 1),
        )
    def forward(self, v_x):
        return self.main(v_x).view(v_x.size(0), 1)

torch.manual_seed(0)
net = Network()

i = 0
while i < 1024:
    v_in = Variable(torch.rand(2,1,1,1), requires_grad=True)
    grad_out = Variable(torch.ones(2,1))

    gradient = autograd.grad(outputs=net(v_in), inputs=v_in,
                             grad_outputs=grad_out,
                             create_graph=True, retain_graph=True,
                             only_inputs=True)[0]
    gradient.mean().backward()

    i += 1
    if i % 256 == 0:
        gc.collect()
        max_mem_used = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print("{:.2f} MB".format(max_mem_used / 1024))
