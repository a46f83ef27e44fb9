# Source: https://github.com/pytorch/pytorch/issues/13613 (the inference loop posted in the thread)
# Adapted: resnet50 -> a small CNN (no torchvision), the data loader is a list of
#   torch.randn(32, 3, 64, 64) batches as suggested in the thread, cuda -> cpu, 40 batches.
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(
    nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(),
    nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
    nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 1000))
dataloader = [torch.randn(32, 3, 64, 64) for _ in range(40)]

model = torch.nn.DataParallel(model)
model.eval()
result = []
for input in dataloader:
    output = model(input)
    result.append(output.data.cpu().numpy())

print(len(result), result[-1].shape)
