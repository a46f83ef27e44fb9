# Source: https://github.com/Stonesjtu/pytorch_memlab/blob/274b20a9b50bc4423e16876b85b530810db26b9a/pytorch_memlab/mem_reporter.py
# Adapted excerpt, after the fix https://github.com/Stonesjtu/pytorch_memlab/commit/274b20a9b50bc4423e16876b85b530810db26b9a
# (trimmed to the code the fix touches; omitted lines are marked).
import math
import gc
from collections import defaultdict

import torch
# ... (lines 6-15 omitted)
class MemReporter():
    ...  # (lines 17-23 omitted)
    def __init__(self, model=None):
        self.tensor_name = {}
        self.device_mapping = defaultdict(list)
        self.device_tensor_stat = {}
        # to numbering the unknown tensors
        self.name_idx = 0
        if model is not None:
            assert isinstance(model, torch.nn.Module)
            # for model with tying weight, multiple parameters may share
            # the same underlying tensor

            tensor_names = defaultdict(list)
            for name, param in model.named_parameters():
                tensor_names[param].append(name)
        for param, name in tensor_names.items():
            self.tensor_name[id(param)] = '+'.join(name)

    def _get_tensor_name(self, tensor):
        tensor_id = id(tensor)
        if tensor_id in self.tensor_name:
            name = self.tensor_name[tensor_id]
        # use numbering if no name can be inferred
        else:
            name = type(tensor).__name__ + str(self.name_idx)
            self.tensor_name[tensor_id] = name
            self.name_idx += 1
        return name
