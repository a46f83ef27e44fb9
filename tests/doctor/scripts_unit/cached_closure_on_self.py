import functools

import torch


class Posterior:
    def __init__(self, mean, scale):
        self.mean = mean
        self.scale = scale

        @functools.lru_cache
        def interval(level):
            return self.mean - level * self.scale, self.mean + level * self.scale

        self.interval = interval


torch.manual_seed(0)
widths = []
for step in range(80):
    post = Posterior(torch.randn(256, 1024), torch.rand(256, 1024))
    low, high = post.interval(2.0)
    widths.append(float((high - low).mean()))
print(round(sum(widths) / len(widths), 4))
