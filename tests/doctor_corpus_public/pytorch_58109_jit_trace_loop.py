# Source: https://github.com/pytorch/pytorch/issues/58109
# Adapted: cuda -> cpu, 25 iterations instead of 2000 (gc and a print every 10), psutil
#   replaced by resource.getrusage.
import gc
import resource
import sys

import torch

nFeatures = 52

layer_neurons = [nFeatures,128,256,512,256,128,128,64,64,32,32,16,16,8,8]
layers = []
for i, o in zip(layer_neurons[:-1], layer_neurons[1:]):
    layers.append(torch.nn.Linear(i, o))
    layers.append(torch.nn.ReLU())
layers.append(torch.nn.Linear(layer_neurons[-1], 3))
net = torch.nn.Sequential(*layers).float()

optimizer = torch.optim.Adam(net.parameters(), lr=0.00025)
loss_fn = torch.nn.MSELoss()

if __name__ == '__main__':
    print("Python version:", sys.version)
    print("PyTorch version: ", torch.__version__)

    torch.manual_seed(0)
    tensor = torch.randn(1, nFeatures)

    for i in range(25):
        m = torch.jit.trace(net, tensor)
        del m
        if (i % 10) == 0:
            gc.collect()
            print(i,  "Memory", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
