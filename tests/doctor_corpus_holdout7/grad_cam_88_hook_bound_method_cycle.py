# Source: https://github.com/jacobgil/pytorch-grad-cam/issues/88
# Adapted: the DummyCAM and foo() kept; the two bias-free linear layers widened from
#   2 -> 3 -> 4 to 512 -> 512 -> 512 and the input from 1x2 to 64x512 so that each call's
#   memory is visible; main() calls foo() 60 times (the issue calls it once and then lists the
#   tensors gc still finds, which is dropped); cpu, seeded.
import torch
from torch import nn


class DummyCAM:
    def __init__(self, model, target_layer):
        self.model = model
        self.target_layer = target_layer
        self.target_output = None
        self.target_grad = None
        self.target_layer.register_forward_hook(self.save_activation)
        self.target_layer.register_full_backward_hook(self.save_gradient)

    def save_activation(self, module, input, output):
        self.target_output = output

    def save_gradient(self, module, grad_input, grad_output):
        self.target_grad = grad_output[0]

    def __call__(self, input_tensor):
        return self.model(input_tensor)


def foo():
    model = nn.Sequential(
        nn.Linear(512, 512, bias=False),
        nn.Linear(512, 512, bias=False)
    )
    x = torch.ones(64, 512)
    cam = DummyCAM(model, model[1])
    return cam(x)


def main():
    torch.manual_seed(0)
    for i in range(60):
        out = foo()
        if i % 10 == 0:
            print(i, out.shape)


main()
