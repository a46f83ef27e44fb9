# Source: https://github.com/pytorch/pytorch/issues/1536
# Adapted: PolicyNet and leak() kept as posted; the stored issue stops at the comment before
#   the two lines that fill sum_log_probs, completed as that comment describes them (the log of
#   each agent's chosen probability added to sum_log_probs) and the stripped-down script's
#   driver written as a loop calling leak(policy_net) 100 times (the issue reports 100
#   iterations); layers [5, 32, 3] as the sizes posted; Softmax given dim=1; cpu, seeded.
import numpy as np
import torch

from torch.autograd import Variable


class PolicyNet(torch.nn.Module):
    def __init__(self, layers):
        super(PolicyNet, self).__init__()
        self.lstm = torch.nn.LSTMCell(layers[0], layers[1])
        self.linear = torch.nn.Linear(layers[1], layers[2])
        self.layers = layers

    def forward(self, x, h0, c0):
        h1, c1 = self.lstm(x, (h0, c0))
        o1 = self.linear(h1)
        return o1, h1, c1


def leak(policy_net):
    h_n_batch = Variable(torch.zeros(1000, 32))
    c_n_batch = Variable(torch.zeros(1000, 32))
    softmax = torch.nn.Softmax(dim=1)

    input_batch = Variable(torch.zeros(2, 1000, 5))

    sum_log_probs = Variable(torch.zeros(1000))
    for i in range(2):
        o_n, h_n_batch, c_n_batch = policy_net(input_batch[i], h_n_batch, c_n_batch)
        dist = softmax(o_n)
        actions = dist.multinomial(1)
        sum_log_probs = sum_log_probs + torch.log(dist.gather(1, actions)).squeeze(1)


torch.manual_seed(0)
np.random.seed(0)
policy_net = PolicyNet([5, 32, 3])
for it in range(100):
    leak(policy_net)
    if it % 20 == 0:
        print(it)
