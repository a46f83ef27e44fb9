# Source: https://github.com/pytorch/pytorch/issues/23900 (the reproduction script as posted)
# Adapted: each item is np.arange(8 * 1024) instead of np.arange(1000 * 1000); a linear model
#   takes one SGD step on every item (the report only printed ru_maxrss), so that the loop has
#   training steps; 60 items instead of 20; the normal-dataset branch dropped.
from torch.utils.data import Dataset
import itertools
import numpy as np
import resource
import torch


def print_memusage():
    memuse = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f'Usage: {memuse / 1e6:0.3f} GB')


class TestDataset(Dataset):
    def __getitem__(self, index):
        return np.arange(8 * 1024, dtype='u8')
    def __len__(self):
        return 1000000


torch.manual_seed(0)
model = torch.nn.Linear(64, 1)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
dataset = TestDataset()
infinite_iterator = itertools.cycle(dataset)

print('Infinite Iterator')
for _, item in zip(range(60), infinite_iterator):
    x = torch.from_numpy(item[:64].astype(np.float32)) / 8192
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print_memusage()
