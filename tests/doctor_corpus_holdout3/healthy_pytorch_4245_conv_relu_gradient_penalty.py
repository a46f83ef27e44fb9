# Source: https://github.com/pytorch/pytorch/issues/4245
# Adapted: the reporter's DCGANDiscriminator (Conv2d 5x5 stride 2 then ReLU) kept with
#   dim=16 instead of 64 and a 1x3x32x32 input instead of 64x64; the stored report stops at
#   `real_data = autograd.Variable(torch.randn(1,3,64,64),req...`, so the rest of the critic
#   iteration (autograd.grad of the output with create_graph=True, a gradient-norm penalty,
#   backward) was completed in the usual gradient-penalty form; gpustat's show_memusage
#   replaced by the RSS from /proc/self/statm, 300 iterations instead of 1000, cpu, seeded.
import os

import torch.autograd as autograd
from torch import optim
import torch
import torch.nn as nn


class DCGANDiscriminator(nn.Module):
    def __init__(self, dim=64, bn=True):
        super(DCGANDiscriminator, self).__init__()
        self.dim = dim
        self.bn = bn

        self.conv1 = nn.Conv2d(3, 8*self.dim, 5,stride=2,padding=2,bias=True)
        self.relu1 = nn.ReLU()

    def forward(self, input):
        output = input.contiguous()
        output = self.conv1(output)
        output = self.relu1(output)
        output = output.view(-1)
        return output


def show_memusage(device=1):
    with open("/proc/%d/statm" % os.getpid()) as f:
        print('RSS: ' + "{} MiB".format(int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 2**20))


torch.manual_seed(0)
aD = DCGANDiscriminator(dim=16)
for i in range(300):
    if i % 100 == 0:
        print("Critic iter: " + str(i))
    aD.zero_grad()
    real_data = autograd.Variable(torch.randn(1,3,32,32),requires_grad=True)
    output = aD(real_data)
    gradients = autograd.grad(outputs=output, inputs=real_data,
                              grad_outputs=torch.ones(output.size()),
                              create_graph=True, retain_graph=True, only_inputs=True)[0]
    gradient_penalty = ((gradients.norm(2) - 1) ** 2)
    gradient_penalty.backward()
    if i % 100 == 0:
        show_memusage()
