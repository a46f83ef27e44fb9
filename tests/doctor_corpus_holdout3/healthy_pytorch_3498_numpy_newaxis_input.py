# Source: https://github.com/pytorch/pytorch/issues/3498
# Adapted: the endless `while True` loop bounded to 3000 iterations, Variable dropped, the
#   peak-RSS print every 1000 iterations kept, cpu, seeded.
import numpy as np
import gc
import resource
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Linear(100, 2)

i = 0
while i < 3000:
    i += 1

    np_arr = np.ones(100).astype(np.float32)
    tensor = torch.from_numpy(np_arr[None])
    variable = tensor
    output = model(variable)

    if i % 1000 == 0:
        gc.collect()
        max_mem_used = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print("{:.2f} MB".format(max_mem_used / 1024))
