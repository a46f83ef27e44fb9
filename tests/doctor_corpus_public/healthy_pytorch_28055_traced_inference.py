# Source: https://github.com/pytorch/pytorch/issues/28055
# Adapted: resnet101 (torchvision, pretrained) -> a small CNN traced the same way, batches of
#   8 x 3 x 64 x 64 instead of 32 x 3 x 224 x 224, 30 iterations instead of 10, psutil ->
#   resource.getrusage, predictions printed as a shape.
import resource

import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(
    nn.Conv2d(3, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
    nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
    nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 1000)).eval()
traced_script_module = torch.jit.trace(model, torch.rand(1, 3, 64, 64))

print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6)

for i in range(30):
    samples = torch.rand(8, 3, 64, 64)
    predictions = traced_script_module(samples)
    print(predictions.shape)
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6)
