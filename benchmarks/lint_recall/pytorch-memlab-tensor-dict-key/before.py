# Source: https://github.com/Stonesjtu/pytorch_memlab/blob/ff71e7300279518a3be01ce96ee1e6b5e41863a7/pytorch_memlab/mem_reporter.py
# Adapted excerpt, before the fix https://github.com/Stonesjtu/pytorch_memlab/commit/274b20a9b50bc4423e16876b85b530810db26b9a
# (trimmed to the code the fix touches; omitted lines are marked).
import math
import gc
from collections import defaultdict

import torch
# ... (lines 6-15 omitted)
class MemReporter():
    ...  # (lines 17-23 omitted)
    def __init__(self, model=None):
        self.tensor_name = defaultdict(list)
        self.device_mapping = defaultdict(list)
        self.device_tensor_stat = {}
        # to numbering the unknown tensors
        self.name_idx = 0
        if model is not None:
            assert isinstance(model, torch.nn.Module)
            # for model with tying weight, multiple parameters may share
            # the same underlying tensor
            for name, param in model.named_parameters():
                self.tensor_name[param].append(name)
        for param, name in self.tensor_name.items():
            self.tensor_name[param] = '+'.join(name)

    def _get_tensor_name(self, tensor):
        if tensor in self.tensor_name:
            name = self.tensor_name[tensor]
        # use numbering if no name can be inferred
        else:
            name = type(tensor).__name__ + str(self.name_idx)
            self.tensor_name[tensor] = name
            self.name_idx += 1
        return name
