# Source: https://github.com/fangwei123456/spikingjelly/blob/2f49da65c928ccf91c50e673ea0e5b6b8d21d4f2/spikingjelly/activation_based/monitor.py
# Adapted excerpt, context file at the parent of https://github.com/fangwei123456/spikingjelly/commit/1e6d44fccc3cdbfbd9cf052ff40151680377c656
# (trimmed to the code the bug crosses; omitted lines are marked).
import os
import time
import re
import datetime
import threading
from typing import Callable, Union, Optional

import torch
from torch import nn
from torch.utils.tensorboard import SummaryWriter


def _unpack_len1_tuple(x: Union[tuple, torch.Tensor]):
    if isinstance(x, tuple) and len(x) == 1:
        return x[0]
    else:
        return x


class BaseMonitor:
    def __init__(self):
        # ... (lines 22-42 omitted)
        self.hooks = []
        self.monitored_layers = []
        self.records = []
        self.name_records_index = {}
        self._enable = True

    def __getitem__(self, i):
        if isinstance(i, int):
            return self.records[i]
        elif isinstance(i, str):
            y = []
            for index in self.name_records_index[i]:
                y.append(self.records[index])
            return y
        else:
            raise ValueError(i)

    def clear_recorded_data(self):
        self.records.clear()
        for v in self.name_records_index.values():
            v.clear()

    def enable(self):
        self._enable = True

    def disable(self):
        self._enable = False

    def is_enable(self):
        return self._enable

    def remove_hooks(self):
        for hook in self.hooks:
            hook.remove()

    def __del__(self):
        self.disable()
        self.clear_recorded_data()
        self.remove_hooks()


class OutputMonitor(BaseMonitor):
    def __init__(
        self,
        net: nn.Module,
        instance: Optional[Union[type, tuple[type, ...]]] = None,
        function_on_output: Callable = lambda x: x,
    ):
        # ... (lines 91-177 omitted)
        super().__init__()
        self.function_on_output = function_on_output
        if instance is None:
            instance = type(net)
        for name, m in net.named_modules():
            if isinstance(m, instance):
                self.monitored_layers.append(name)
                self.name_records_index[name] = []
                self.hooks.append(m.register_forward_hook(self.create_hook(name)))

    def create_hook(self, name):
        def hook(m, x, y):
            if self.is_enable():
                self.name_records_index[name].append(self.records.__len__())
                self.records.append(self.function_on_output(_unpack_len1_tuple(y)))

        return hook


class InputMonitor(BaseMonitor):
    def __init__(
        self,
        net: nn.Module,
        instance: Optional[Union[type, tuple[type, ...]]] = None,
        function_on_input: Callable = lambda x: x,
    ):
        # ... (lines 204-295 omitted)
        super().__init__()
        self.function_on_input = function_on_input
        if instance is None:
            instance = type(net)
        for name, m in net.named_modules():
            if isinstance(m, instance):
                self.monitored_layers.append(name)
                self.name_records_index[name] = []
                self.hooks.append(m.register_forward_hook(self.create_hook(name)))

    def create_hook(self, name):
        def hook(m, x, y):
            if self.is_enable():
                self.name_records_index[name].append(self.records.__len__())
                self.records.append(self.function_on_input(_unpack_len1_tuple(x)))

        return hook


# ... (lines 315-869 omitted)
