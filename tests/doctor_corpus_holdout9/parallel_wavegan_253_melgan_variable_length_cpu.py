# Source: https://github.com/kan-bayashi/ParallelWaveGAN/issues/253
#   code: the test loop (a random number of frames l between 20 and 10000, c =
#   torch.rand(l, 80), out = model((c)) with model a MelGANGenerator, on the CPU; the reporter
#   sees the memory keep increasing, also with a CPU-only run) with MelGANGenerator and
#   ResidualStack of parallel_wavegan/models/melgan.py and parallel_wavegan/layers/residual_stack.py
#   (reflection padding, transposed-convolution upsampling, dilated residual stacks,
#   inference(c) for a (T, 80) input)
# Adapted: the generator reduced to 64 channels, upsample_scales [8, 8] and two residual stacks
#   per scale; frames drawn between 20 and 400 (the reporter's go to 10000) for 300 iterations
#   (the reporter's 20000); the model wrapper whose forward returns self.melgan(c) calls
#   inference(c); weight norm dropped; cpu, seeded.
import random

import numpy as np
import torch


class ResidualStack(torch.nn.Module):
    def __init__(self, kernel_size=3, channels=32, dilation=1, bias=True,
                 nonlinear_activation="LeakyReLU", nonlinear_activation_params={"negative_slope": 0.2},
                 pad="ReflectionPad1d", pad_params={}):
        super(ResidualStack, self).__init__()
        self.stack = torch.nn.Sequential(
            getattr(torch.nn, nonlinear_activation)(**nonlinear_activation_params),
            getattr(torch.nn, pad)((kernel_size - 1) // 2 * dilation, **pad_params),
            torch.nn.Conv1d(channels, channels, kernel_size, dilation=dilation, bias=bias),
            getattr(torch.nn, nonlinear_activation)(**nonlinear_activation_params),
            torch.nn.Conv1d(channels, channels, 1, bias=bias),
        )
        self.skip_layer = torch.nn.Conv1d(channels, channels, 1, bias=bias)

    def forward(self, c):
        return self.stack(c) + self.skip_layer(c)


class MelGANGenerator(torch.nn.Module):
    def __init__(self, in_channels=80, out_channels=1, kernel_size=7, channels=64, bias=True,
                 upsample_scales=[8, 8], stack_kernel_size=3, stacks=2,
                 nonlinear_activation="LeakyReLU", nonlinear_activation_params={"negative_slope": 0.2},
                 pad="ReflectionPad1d", pad_params={}):
        super(MelGANGenerator, self).__init__()
        layers = []
        layers += [
            getattr(torch.nn, pad)((kernel_size - 1) // 2, **pad_params),
            torch.nn.Conv1d(in_channels, channels, kernel_size, bias=bias),
        ]
        for i, upsample_scale in enumerate(upsample_scales):
            layers += [getattr(torch.nn, nonlinear_activation)(**nonlinear_activation_params)]
            layers += [
                torch.nn.ConvTranspose1d(
                    channels // (2 ** i), channels // (2 ** (i + 1)), upsample_scale * 2, stride=upsample_scale,
                    padding=upsample_scale // 2 + upsample_scale % 2, output_padding=upsample_scale % 2, bias=bias)
            ]
            for j in range(stacks):
                layers += [
                    ResidualStack(kernel_size=stack_kernel_size, channels=channels // (2 ** (i + 1)),
                                  dilation=stack_kernel_size ** j, bias=bias,
                                  nonlinear_activation=nonlinear_activation,
                                  nonlinear_activation_params=nonlinear_activation_params,
                                  pad=pad, pad_params=pad_params)
                ]
        layers += [getattr(torch.nn, nonlinear_activation)(**nonlinear_activation_params)]
        layers += [
            getattr(torch.nn, pad)((kernel_size - 1) // 2, **pad_params),
            torch.nn.Conv1d(channels // (2 ** (i + 1)), out_channels, kernel_size, bias=bias),
            torch.nn.Tanh(),
        ]
        self.melgan = torch.nn.Sequential(*layers)

    def forward(self, c):
        return self.melgan(c)

    def inference(self, c):
        c = self.melgan(c.transpose(1, 0).unsqueeze(0))
        return c.squeeze(0).transpose(1, 0)


class Vocoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.melgan = MelGANGenerator()

    def forward(self, c):
        return self.melgan.inference(c)


random.seed(0)
np.random.seed(0)
torch.manual_seed(0)
model = Vocoder().eval()
for i in range(300):
    l = int(random.randint(20, 400))
    c = torch.rand(l, 80)
    out = model((c))
    if i % 50 == 0:
        print(i, l, tuple(out.shape))
