# Source: https://github.com/pytorch/pytorch/issues/85698
# Adapted: device cuda -> cpu, so autocast runs with device_type="cpu" and torch.bfloat16
#   instead of float16; the buffer has 8192 rows instead of 41292 and the batch is 16 instead
#   of 1024 (the autocast copy of the expanded buffer is 16 MiB instead of 5 GiB); 40
#   iterations per setting instead of 10; torch.cuda.empty_cache()/memory_allocated() replaced
#   by the bytes of live tensors; seeded.
import gc

import torch
import torch.nn as nn


class MyModule(nn.Module):
    def __init__(self):
        super().__init__()
        base = torch.randn((8192, 64))
        self.register_buffer("base", base)

    def forward(self, tensor):
        batch_size = tensor.shape[0]
        tensor = tensor.unsqueeze(-1)  # (B, 64, 1)
        return self.base.expand(batch_size, -1, -1).bmm(tensor)


torch.manual_seed(0)
device = torch.device('cpu')
model = MyModule().to(device)

for use_amp in [True, False]:
    for i in range(40):
        with torch.autocast(
            device_type="cpu", dtype=torch.bfloat16, enabled=use_amp
        ):
            output = model(torch.randn((16, 64), requires_grad=True, device=device))
            if i % 10 == 0:
                live = [o for o in gc.get_objects() if torch.is_tensor(o)]
                print("Memory Used:", sum(t.untyped_storage().nbytes() for t in live))
                del live
