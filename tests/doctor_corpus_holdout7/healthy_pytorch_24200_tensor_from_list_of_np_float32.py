# Source: https://github.com/pytorch/pytorch/issues/24200
# Adapted: the reproduction kept (torch.tensor on a Python list of 10000 np.float32
#   scalars, without dtype, memory printed after each call); 200 calls instead of 10; the
#   printout every 40 calls.
import numpy as np
import torch


def mem():
	import os, psutil
	return psutil.Process(os.getpid()).memory_info().rss // 1024


a = np.zeros(10000, dtype = np.float32)
a = list(a)

mem_base = mem()
for i in range(200):
	torch.tensor(a)
	if i % 40 == 0:
		print(mem() - mem_base)
