# Source: https://github.com/pytorch/pytorch/issues/869
# Adapted: the `while True` loop bounded to 3000 iterations, Variable(torch.FloatTensor(32,16))
#   written as torch.FloatTensor(32, 16).zero_() (Variable is a no-op since torch 0.4; zeroed
#   so that the values are defined), cpu instead of .cuda(), a print of the sum every 1000
#   iterations added, seeded.
import torch

torch.manual_seed(0)
for i in range(3000):
    # old a overwritten by new variable, old a should get gc'd
    a = torch.FloatTensor(32, 16).zero_()  # with and without .cuda()
    a += a
    if i % 1000 == 0:
        print(i, a.sum().item())
