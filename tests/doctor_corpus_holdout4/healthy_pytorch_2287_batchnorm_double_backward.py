# Source: https://github.com/pytorch/pytorch/issues/2287
# Adapted: inputs of torch.rand(8, 100, 8, 8) instead of (100, 100, 100, 100), 40
#   iterations instead of 100, use_cuda = False, Variable(...) kept as a plain tensor with
#   requires_grad=True (Variable is a no-op since torch 0.4), the print of i every 20
#   iterations, seeded.
import torch
import torch.nn as nn
import torch.nn.functional as F


class BatchNormTest(nn.Module):
    def __init__(self, c, num_classes=2):
        super(BatchNormTest, self).__init__()
        self.bn = nn.BatchNorm2d(c)

    def forward(self, x):
        out = x
        out = self.bn(out)
        # any nonlinearity causes BatchNormBackward to fail
        out = F.relu(out)
        return out


torch.manual_seed(0)
c = 100
net = BatchNormTest(c)
use_cuda = False
inputs = torch.rand(8, c, 8, 8, requires_grad=True)
if use_cuda:
    net.cuda()
    inputs = inputs.cuda()

T = 40
for i in range(T):
    output = net(inputs)
    loss1 = torch.sum(output)
    grad_params = torch.autograd.grad(loss1, inputs, create_graph=True)

    grad = grad_params[0]
    loss = torch.sum(grad)

    loss.backward()
    if i % 20 == 0:
        print(i)
