# Source: https://github.com/facebookresearch/fairseq/issues/2982
# Adapted: MyDataset kept as posted; fairseq (not installed) is replaced by a FairseqDataset stub
#   (a torch Dataset); the posted read_data elides its loop (`for ...........:`), which is
#   completed to read 2000 random token-id lines of 50-200 tokens; get_original_text is cut
#   in the stored copy and dropped; the dataset is read by a DataLoader-style loop over 3
#   epochs of shuffled indices (the reporter's training is not in the issue); seeded.
import random
from functools import lru_cache

import numpy as np
import torch


class FairseqDataset(torch.utils.data.Dataset):
    pass


class MyDataset(FairseqDataset):
    def __init__(self, path,  append_eos=True, reverse_order=False, split="train"):
        self.inputs_list = []
        self.lines = []
        self.sizes = []
        self.append_eos = append_eos
        self.reverse_order = reverse_order
        self.path = path
        self.split = split
        self.read_data()
        self.size = len(self.inputs_list)

    def read_data(self):
        for _ in range(2000):
            input_ids = [random.randrange(32000) for _ in range(random.randint(50, 200))]
            self.inputs_list.append(input_ids)
            self.sizes.append(len(input_ids))
        self.sizes = np.array(self.sizes)

    def check_index(self, i):
        if i < 0 or i >= self.size:
            raise IndexError('index out of range')

    @lru_cache(maxsize=8)
    def __getitem__(self, i):
        self.check_index(i)
        a = self.inputs_list[i]
        item = torch.LongTensor(a)
        return item


random.seed(0)
torch.manual_seed(0)
dataset = MyDataset("train.txt")
total = 0
for epoch in range(3):
    order = list(range(len(dataset.inputs_list)))
    random.shuffle(order)
    for i in order:
        item = dataset[i]
        total += int(item.numel())
    print(epoch, total)
