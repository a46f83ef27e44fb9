# Source: https://github.com/pytorch/pytorch/issues/76434
# Adapted: the reproduction as posted (a module gets a load_state_dict pre-hook with
#   with_module=True, then is deleted), run 200 times; each module is given a 4 MiB buffer
#   (the posted module has no tensor).
import torch

def hook(self, *args, **kwargs):
    pass

for step in range(200):
    module = torch.nn.Module()
    module.register_buffer("weight", torch.zeros(1 << 20))
    module._register_load_state_dict_pre_hook(hook, with_module=True)
    del module
