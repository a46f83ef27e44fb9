# Source: https://github.com/chr5tphr/zennit/issues/11
#   code: the loop (a new composite each iteration, used as a context around the
#   forward and backward pass, heatmap taken from data.grad) with Hook, LinearHook, Identity,
#   mod_params, stabilize, RemovableHandleList, CompositeContext and Composite of zennit/core.py
#   at 52284ed^ (before the fix the maintainer made for this issue): Hook.pre_forward registers
#   a closure over the hook on the Identity node's grad_fn, and LinearHook.forward keeps the
#   layer input in self.input
# Adapted: VGG-16 replaced by a small convolutional classifier in eval mode; the composite
#   "epsilon_plus_flat" reduced to the epsilon rule (a LinearHook with the epsilon gradient
#   mapper) on every Conv2d and Linear layer; a random 1x3x64x64 input; 30 iterations instead
#   of 100; cpu, seeded.
import functools
from contextlib import contextmanager

import torch
import torch.nn as nn


def stabilize(input, epsilon=1e-6):
    return input + ((input == 0.).to(input) + input.sign()) * epsilon


@contextmanager
def mod_params(module, modifier):
    try:
        if modifier is not None:
            if module.weight is not None:
                original_weight = module.weight.data
                module.weight.data = modifier(module.weight.data)
            if module.bias is not None:
                original_bias = module.bias.data
                module.bias.data = modifier(module.bias.data)
        yield module
    finally:
        if modifier is not None:
            if module.weight is not None:
                module.weight.data = original_weight
            if module.bias is not None:
                module.bias.data = original_bias


class Identity(torch.autograd.Function):
    @staticmethod
    def forward(ctx, *inputs):
        if len(inputs) == 1:
            return inputs[0]
        return inputs

    @staticmethod
    def backward(ctx, *grad_outputs):
        if len(grad_outputs) == 1:
            return grad_outputs[0]
        return grad_outputs


class Hook:
    def __init__(self):
        self.grad_output = None

    def pre_forward(self, module, input):
        @functools.wraps(self.backward)
        def wrapper(grad_input, grad_output):
            return self.backward(module, grad_input, self.grad_output)

        output = Identity.apply(input[0])
        output.grad_fn.register_hook(wrapper)
        output = output.clone()
        return (output,)

    def pre_backward(self, module, grad_input, grad_output):
        self.grad_output = grad_output

    def forward(self, module, input, output):
        pass

    def backward(self, module, grad_input, grad_output):
        pass

    def copy(self):
        return self.__class__()


class LinearHook(Hook):
    def __init__(self, input_modifiers=None, param_modifiers=None, output_modifiers=None, gradient_mapper=None,
                 reducer=None):
        super().__init__()
        modifiers = {'in': input_modifiers, 'param': param_modifiers, 'out': output_modifiers}
        supplied = {key for key, val in modifiers.items() if val is not None}
        num_mods = len(next(iter(supplied), (None,)))
        modifiers.update({key: (self._default_modifier,) * num_mods for key in set(modifiers) - supplied})
        self.input_modifiers = modifiers['in']
        self.param_modifiers = modifiers['param']
        self.output_modifiers = modifiers['out']
        self.gradient_mapper = gradient_mapper or self._default_gradient_mapper
        self.reducer = reducer or self._default_reducer
        self.input = None
        self.output = None

    def forward(self, module, input, output):
        self.input = input

    def backward(self, module, grad_input, grad_output):
        inputs = []
        outputs = []
        for in_mod, param_mod, out_mod in zip(self.input_modifiers, self.param_modifiers, self.output_modifiers):
            input = in_mod(self.input[0].detach()).requires_grad_()
            with mod_params(module, param_mod) as modified, torch.autograd.enable_grad():
                output = modified.forward(input)
                output = out_mod(output)
            inputs.append(input)
            outputs.append(output)
        gradients = torch.autograd.grad(outputs, inputs, grad_outputs=self.gradient_mapper(grad_output[0], outputs))
        relevance = self.reducer(inputs, gradients)
        return tuple(relevance if original.shape == relevance.shape else None for original in grad_input)

    def copy(self):
        return LinearHook(self.input_modifiers, self.param_modifiers, self.output_modifiers, self.gradient_mapper,
                          self.reducer)

    @staticmethod
    def _default_modifier(obj):
        return obj

    @staticmethod
    def _default_gradient_mapper(out_grad, outputs):
        return tuple(out_grad / stabilize(output) for output in outputs)

    @staticmethod
    def _default_reducer(inputs, gradients):
        return sum(input * gradient for input, gradient in zip(inputs, gradients))


class RemovableHandleList(list):
    def remove(self):
        for handle in self:
            handle.remove()
        self.clear()


class CompositeContext:
    def __init__(self, module, composite):
        self.module = module
        self.composite = composite

    def __enter__(self):
        self.composite.register(self.module)
        return self.module

    def __exit__(self, exc_type, exc_value, traceback):
        self.composite.remove()


class Composite:
    def __init__(self, module_map=None, canonizers=None):
        self.module_map = module_map
        self.canonizers = canonizers or []
        self.handles = RemovableHandleList()

    def register(self, module):
        self.handles.remove()
        ctx = {}
        for name, child in module.named_modules():
            template = self.module_map(ctx, name, child)
            if template is not None:
                hook = template.copy()
                self.handles.append(child.register_forward_pre_hook(hook.pre_forward))
                self.handles.append(child.register_forward_hook(hook.forward))
                self.handles.append(child.register_backward_hook(hook.pre_backward))

    def remove(self):
        self.handles.remove()

    def context(self, module):
        return CompositeContext(module, self)


def epsilon_plus_flat():
    rule = LinearHook(gradient_mapper=lambda out_grad, outputs: tuple(out_grad / stabilize(o, 1e-6) for o in outputs))
    return Composite(module_map=lambda ctx, name, m: rule if isinstance(m, (nn.Conv2d, nn.Linear)) else None)


COMPOSITES = {"epsilon_plus_flat": epsilon_plus_flat}

torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(),
                      nn.MaxPool2d(2), nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4),
                      nn.Flatten(), nn.Linear(64 * 16, 100))
model.eval()

data = torch.randn((1, 3, 64, 64))
data.requires_grad = True
target = 0

eye = torch.eye(100)
output_relevance = eye[[target]]

for i in range(30):
    try:
        composite = COMPOSITES["epsilon_plus_flat"]()
    except KeyError:
        raise ValueError("Method not defined. Available are {}".format(list(COMPOSITES)))

    with composite.context(model) as modified:
        pred = modified(data)
        torch.autograd.backward((pred,), (output_relevance,))

    heatmaps = data.grad.sum(1).detach().cpu().numpy()
    if i % 10 == 0:
        print(i, heatmaps.shape, float(abs(heatmaps).sum()))
