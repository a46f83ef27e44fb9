# Source: https://github.com/pytorch/pytorch/issues/96726
# Adapted: the module M and run_leak() kept (the time.sleep(2) pauses dropped); the
#   weight made (2e5, 10) and the example input (2e5, 1) instead of 1e7 rows; run_leak() is
#   called 8 times in a row (the issue calls it once and prints the RSS after each delete).
import time
import psutil, os
import torch
import gc

class M(torch.nn.Module):
    def __init__(self):
          super(M, self).__init__()
          self.w1 = torch.rand(int(2e5), 10)
          print("malloc input", hex(self.w1.data_ptr()),  "size", 2e5 * 10 * 4 / 1024 / 1024, "MB")

    def forward(self, x):
        x = self.w1 + x
        return x


def run_leak():
    process = psutil.Process(os.getpid())
    print("crurent mem usage:", process.memory_info().rss / 1024/1024, "MB")
    a = M().eval()
    input = torch.zeros(int(2e5), 1)
    print("malloc input", hex(input.data_ptr()),  "size", 2e5 * 4 / 1024 / 1024, "MB")
    print("crurent mem usage:", process.memory_info().rss / 1024/1024, "MB")
    print("trace==============")
    a_trace = torch.jit.trace(a, input)

    del(input)
    print("===============================================delete input")
    print("crurent mem usage:", process.memory_info().rss / 1024/1024, "MB")
    gc.collect()
    print("gc=================================================")
    print("crurent mem usage:", process.memory_info().rss / 1024/1024, "MB")

    del(a_trace)
    print("===============================================delete a_trace")
    print("crurent mem usage:", process.memory_info().rss / 1024/1024, "MB")


for i in range(8):
    run_leak()
