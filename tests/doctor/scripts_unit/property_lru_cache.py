import functools

import torch


class Estimate:
    def __init__(self, samples):
        self.samples = samples

    @property
    @functools.lru_cache(maxsize=None)
    def spread(self):
        return self.samples.std(dim=0)


torch.manual_seed(0)
best = None
for round_ in range(60):
    estimate = Estimate(torch.randn(64, 4096))
    score = float(estimate.spread.mean())  # the cache keeps every Estimate ever read
    best = score if best is None else max(best, score)
print(round(best, 4))
