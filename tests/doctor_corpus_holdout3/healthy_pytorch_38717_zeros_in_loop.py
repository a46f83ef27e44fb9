# Source: https://github.com/pytorch/pytorch/issues/38717
# Adapted: the reporter's demo (`bboxs.size(0) = 1 or 2`, `self.input_size = (250, 192)`)
#   made runnable as a small class whose method allocates the crop batch with torch.zeros for a
#   random number of boxes (1 or 2) and fills it from a random frame; 200 iterations instead of
#   `while True`, the RSS printed every 50, cpu, seeded.
import os
import random

import torch


class Cropper:
    def __init__(self):
        self.input_size = (250, 192)

    def crop(self, frame, bboxs):
        inps = torch.zeros(bboxs.size(0), 3, *self.input_size)
        for k in range(bboxs.size(0)):
            inps[k] = frame[:, :self.input_size[0], :self.input_size[1]]
        return inps


def rss():
    with open("/proc/%d/statm" % os.getpid()) as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


random.seed(0)
torch.manual_seed(0)
cropper = Cropper()
frame = torch.rand(3, 480, 640)
for step in range(200):
    bboxs = torch.rand(random.choice([1, 2]), 4)
    inps = cropper.crop(frame, bboxs)
    if step % 50 == 0:
        print(step, tuple(inps.shape), rss() // 2**20, "MiB")
