# Source: https://github.com/pytorch/pytorch/issues/28647
# Adapted: SomeNet kept as posted (without its comment on memoryUser, which named the
#   problem); the stored copy of the issue stops inside SomeNet.forward, so
#   forward is completed to run memoryUser and the loop the issue describes ("recreate the net
#   and send it to cuda again", "even when you delete the object with del and empty the
#   cache") is written out: 60 nets built, run once on a random batch and deleted; `.cuda()`
#   dropped (cpu), the GPU memory reading replaced by the bytes of the parameters still alive
#   (counted through weak references); seeded.
import weakref

import torch.nn as nn
import torch

torch.manual_seed(0)
params = []


def memory_in_use():
    return sum(p.element_size() * p.nelement() for p in (r() for r in params) if p is not None)


class SomeNet(nn.Module):

    def __init__(self):
        super(SomeNet, self).__init__()

        self.memoryUser = nn.Sequential(
            nn.Linear(10000, 256),
            nn.Linear(256, 200)
        )
        self.compare = ["nice object", "totally nice object"]
        self.wired = ["nice object", "totally nice object"]

        self.someLambda = lambda x: ( self.wired )

    def forward(self, x):
        return self.memoryUser(x)


for i in range(60):
    net = SomeNet()
    params.extend(weakref.ref(p) for p in net.parameters())
    out = net(torch.randn(8, 10000))
    del net, out
    if i % 10 == 0:
        print(i, "MiB in use:", memory_in_use() / 2**20)
