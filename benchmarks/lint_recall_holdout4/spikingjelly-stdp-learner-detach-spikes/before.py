# Source: https://github.com/fangwei123456/spikingjelly/blob/2f49da65c928ccf91c50e673ea0e5b6b8d21d4f2/spikingjelly/activation_based/learning.py
# Adapted excerpt, before the fix https://github.com/fangwei123456/spikingjelly/commit/1e6d44fccc3cdbfbd9cf052ff40151680377c656
# (trimmed to the code the fix touches; omitted lines are marked).
from typing import Callable, Union

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import neuron, monitor, base

# ... (lines 11-697 omitted)
class STDPLearner(base.MemoryModule):
    def __init__(
        self,
        step_mode: str,
        synapse: Union[nn.Conv2d, nn.Linear],
        sn: neuron.BaseNode,
        tau_pre: float,
        tau_post: float,
        f_pre: Callable = lambda x: x,
        f_post: Callable = lambda x: x,
    ):
        # ... (lines 709-770 omitted)
        super().__init__()
        self.step_mode = step_mode
        self.tau_pre = tau_pre
        self.tau_post = tau_post
        self.f_pre = f_pre
        self.f_post = f_post
        self.synapse = synapse
        self.in_spike_monitor = monitor.InputMonitor(synapse)
        self.out_spike_monitor = monitor.OutputMonitor(sn)

        self.register_memory("trace_pre", None)
        self.register_memory("trace_post", None)

    def reset(self):
        # ... (lines 785-804 omitted)
        super(STDPLearner, self).reset()
        self.in_spike_monitor.clear_recorded_data()
        self.out_spike_monitor.clear_recorded_data()

    # ... (lines 809-856 omitted)
    def step(self, on_grad: bool = True, scale: float = 1.0):
        # ... (lines 858-901 omitted)
        length = self.in_spike_monitor.records.__len__()
        delta_w = None

        if self.step_mode == "s":
            if isinstance(self.synapse, nn.Linear):
                stdp_f = stdp_linear_single_step
            elif isinstance(self.synapse, nn.Conv2d):
                stdp_f = stdp_conv2d_single_step
            elif isinstance(self.synapse, nn.Conv1d):
                stdp_f = stdp_conv1d_single_step
            else:
                raise NotImplementedError(self.synapse)
        elif self.step_mode == "m":
            if isinstance(self.synapse, (nn.Linear, nn.Conv1d, nn.Conv2d)):
                stdp_f = stdp_multi_step
            else:
                raise NotImplementedError(self.synapse)
        else:
            raise ValueError(self.step_mode)

        for _ in range(length):
            in_spike = self.in_spike_monitor.records.pop(0)  # [batch_size, N_in]
            out_spike = self.out_spike_monitor.records.pop(0)  # [batch_size, N_out]

            self.trace_pre, self.trace_post, dw = stdp_f(
                self.synapse,
                in_spike,
                out_spike,
                self.trace_pre,
                self.trace_post,
                self.tau_pre,
                self.tau_post,
                self.f_pre,
                self.f_post,
            )
            if scale != 1.0:
                dw *= scale

            delta_w = dw if (delta_w is None) else (delta_w + dw)

        if on_grad:
            if self.synapse.weight.grad is None:
                self.synapse.weight.grad = -delta_w
            else:
                self.synapse.weight.grad = self.synapse.weight.grad - delta_w
        else:
            return delta_w

# ... (lines 950-1484 omitted)
