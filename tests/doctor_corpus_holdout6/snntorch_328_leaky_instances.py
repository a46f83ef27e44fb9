# Source: https://github.com/jeshraghian/snntorch/issues/328
# Adapted: the loop as posted (build a Leaky neuron, delete it, repeat) with the parts
#   of snntorch 0.9.1 it runs copied in: SpikingNeuron.__init__ and its buffer helpers, LIF,
#   Leaky.__init__/_init_mem and surrogate.fast_sigmoid, trimmed to the default arguments
#   used (no quantisation, inhibition or learnable parameters); "cuda" -> cpu, the two loops
#   of 3 -> two loops of 100, the torch.cuda memory prints -> a print of the neuron count.
import torch
import torch.nn as nn


class FastSigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_, slope):
        ctx.save_for_backward(input_)
        ctx.slope = slope
        out = (input_ > 0).float()
        return out

    @staticmethod
    def backward(ctx, grad_output):
        (input_,) = ctx.saved_tensors
        grad_input = grad_output.clone()
        grad = grad_input / (ctx.slope * torch.abs(input_) + 1.0) ** 2
        return grad, None


def fast_sigmoid(slope=25):
    """FastSigmoid surrogate gradient enclosed with a parameterized slope."""
    slope = slope

    def inner(x):
        return FastSigmoid.apply(x, slope)

    return inner


class surrogate:
    fast_sigmoid = staticmethod(fast_sigmoid)


class SpikingNeuron(nn.Module):
    """Parent class for spiking neuron models."""

    instances = []

    reset_dict = {
        "subtract": 0,
        "zero": 1,
        "none": 2,
    }

    def __init__(
        self,
        threshold=1.0,
        spike_grad=None,
        init_hidden=False,
        reset_mechanism="subtract",
        graded_spikes_factor=1.0,
    ):
        super().__init__()

        SpikingNeuron.instances.append(self)

        self.spike_grad = spike_grad
        self.init_hidden = init_hidden

        self._threshold_buffer(threshold)
        self._graded_spikes_buffer(graded_spikes_factor)
        self._reset_mechanism_buffer(reset_mechanism)
        self._reset_mechanism = reset_mechanism

    def _graded_spikes_buffer(self, graded_spikes_factor):
        if not isinstance(graded_spikes_factor, torch.Tensor):
            graded_spikes_factor = torch.as_tensor(graded_spikes_factor)
        self.register_buffer("graded_spikes_factor", graded_spikes_factor)

    def _threshold_buffer(self, threshold):
        if not isinstance(threshold, torch.Tensor):
            threshold = torch.as_tensor(threshold)
        self.register_buffer("threshold", threshold)

    def _reset_mechanism_buffer(self, reset_mechanism):
        reset_mechanism_val = torch.as_tensor(
            SpikingNeuron.reset_dict[reset_mechanism]
        )
        self.register_buffer("reset_mechanism_val", reset_mechanism_val)


class LIF(SpikingNeuron):
    """Parent class for leaky integrate and fire neuron models."""

    def __init__(self, beta, threshold=1.0, spike_grad=None, init_hidden=False,
                 reset_mechanism="subtract", graded_spikes_factor=1.0):
        super().__init__(threshold, spike_grad, init_hidden, reset_mechanism,
                         graded_spikes_factor)
        self._beta_buffer(beta)

    def _beta_buffer(self, beta):
        if not isinstance(beta, torch.Tensor):
            beta = torch.as_tensor(beta)
        self.register_buffer("beta", beta)


class Leaky(LIF):
    def __init__(self, beta, threshold=1.0, spike_grad=None, init_hidden=False,
                 reset_mechanism="subtract", graded_spikes_factor=1.0, reset_delay=True):
        super().__init__(beta, threshold, spike_grad, init_hidden, reset_mechanism,
                         graded_spikes_factor)

        self._init_mem()

        if self.reset_mechanism_val == 0:  # reset by subtraction
            self.state_function = self._base_sub
        elif self.reset_mechanism_val == 1:  # reset to zero
            self.state_function = self._base_zero
        elif self.reset_mechanism_val == 2:  # no reset, pure integration
            self.state_function = self._base_int

        self.reset_delay = reset_delay

    def _init_mem(self):
        mem = torch.zeros(0)
        self.register_buffer("mem", mem, False)

    def _base_state_function(self, input_):
        return self.beta.clamp(0, 1) * self.mem + input_

    def _base_sub(self, input_):
        return self._base_state_function(input_) - self.reset * self.threshold

    def _base_zero(self, input_):
        self.mem = (1 - self.reset) * self.mem
        return self._base_state_function(input_)

    def _base_int(self, input_):
        return self._base_state_function(input_)


class snn:
    Leaky = Leaky
    surrogate = surrogate


for i in range(100):
    l = snn.Leaky(beta=0.5, spike_grad=snn.surrogate.fast_sigmoid(slope=25)).to("cpu")
    del l

print("=======================")

for i in range(100):
    l = snn.Leaky(beta=0.5, spike_grad=snn.surrogate.fast_sigmoid(slope=25)).to("cpu")
    del l

print("neurons:", len(SpikingNeuron.instances))
