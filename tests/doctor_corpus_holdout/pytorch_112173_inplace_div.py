# Source: https://github.com/pytorch/pytorch/issues/112173
# Adapted: the shorter repro from the thread; .cuda() and .to("cuda") -> cpu, 1000
#   iterations instead of 10**6, seeded.
import torch

torch.manual_seed(0)

model = torch.nn.Linear(4, 1024)

for i in range(1000):
    inputs = torch.randn(2, 4).to("cpu")
    image_features = model(inputs)
    image_features /= image_features.norm(dim=-1, keepdim=True)
