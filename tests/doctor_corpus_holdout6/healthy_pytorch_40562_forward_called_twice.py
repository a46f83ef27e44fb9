# Source: https://github.com/pytorch/pytorch/issues/40562
# Adapted: the MemoryModel as posted (its forward runs self.model four times and keeps
#   two of the outputs); the printed torch.cuda.max_memory_allocated() is dropped (cpu), the
#   model is called 300 times on random (64, 128) inputs with grad enabled, seeded.
from torch import nn
import torch

torch.manual_seed(0)


class MemoryModel(nn.Module):

    def __init__(self):

        super(MemoryModel, self).__init__()

        self.model = nn.Linear(128, 128)

    def forward(self, input_ids):
        output = self.model(input_ids)
        self.model(input_ids)
        output = self.model(input_ids)
        self.model(input_ids)
        return output


model = MemoryModel()
for step in range(300):
    input_ids = torch.randn(64, 128)
    out = model(input_ids)
    if step % 100 == 0:
        print(step, out.sum().item())
