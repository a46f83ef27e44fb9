# Source: https://github.com/pytorch/pytorch/issues/3665
# Adapted: .cuda() removed (cpu), the batch reduced from (96, 200, 200) to (8, 20, 200)
#   and the loops from 2000 to 40 iterations (memory printed every 10); the second run with
#   cudnn disabled kept (a no-op on cpu); psutil replaced by /proc/self/statm.
import torch
import torch.nn as nn

print('torch-version: ', torch.__version__)
print('cudnn version: ', torch.backends.cudnn.version())
torch.manual_seed(0)
lstm = nn.LSTM(200, 2, batch_first=True)


fake_data = torch.Tensor(8, 20, 200).normal_()


def test():
    import os
    pid = os.getpid()
    for i in range(40):
        loss = lstm(fake_data)[0].mean()
        loss.backward()
        if i % 10 == 0:
            import gc
            gc.collect()
            with open('/proc/%d/statm' % pid) as f:
                memoryUse = int(f.read().split()[1]) * 4096 / 2.**20  # memory use in MB...I think
            print('iteration {}: memory use: {}MB'.format(i, memoryUse))


test()

torch.backends.cudnn.enabled = False
print('With cudnn disabled')
test()
