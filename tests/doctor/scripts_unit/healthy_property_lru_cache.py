import functools

import torch


class Estimate:
    def __init__(self, samples):
        self.samples = samples

    @functools.cached_property
    def spread(self):
        return self.samples.std(dim=0)


torch.manual_seed(0)
best = None
for round_ in range(60):
    estimate = Estimate(torch.randn(64, 4096))
    score = float(estimate.spread.mean())
    best = score if best is None else max(best, score)
print(round(best, 4))
