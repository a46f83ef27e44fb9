# Source: https://github.com/meta-pytorch/opacus/issues/176
#   code: opacus/grad_sample/grad_sample_module.py of opacus 0.13 (GradSampleModule.add_hooks,
#   capture_activations_hook, capture_backprops_hook) and the per-sample gradient of nn.Linear
#   from opacus/grad_sample/linear.py
# Adapted: only the parts of GradSampleModule that a two-layer MLP uses (nn.Linear layers;
#   the privacy engine, noise and clipping left out), random 32-feature data, 10 training
#   steps then 40 evaluation batches as in the report, cpu, seeded.
from functools import partial
from typing import List

import torch
import torch.nn as nn
import torch.nn.functional as F


def requires_grad(module: nn.Module) -> bool:
    return any(p.requires_grad for p in module.parameters(recurse=False))


def compute_linear_grad_sample(layer: nn.Linear, A: torch.Tensor, B: torch.Tensor, batch_dim: int = 0):
    gs = torch.einsum("n...i,n...j->nij", B, A)
    layer.weight.grad_sample = gs
    if layer.bias is not None:
        layer.bias.grad_sample = torch.einsum("n...k->nk", B)


class GradSampleModule(nn.Module):
    GRAD_SAMPLERS = {nn.Linear: compute_linear_grad_sample}

    def __init__(self, m: nn.Module, *, batch_first=True, loss_reduction="mean"):
        super().__init__()
        self._module = m
        self.hooks_enabled = False
        self.batch_first = batch_first
        self.loss_reduction = loss_reduction
        self.add_hooks(loss_reduction=loss_reduction, batch_first=batch_first)

    def forward(self, x):
        return self._module(x)

    def add_hooks(self, loss_reduction: str = "mean", batch_first: bool = True) -> None:
        if hasattr(self._module, "autograd_grad_sample_hooks"):
            raise ValueError("Trying to add hooks twice to the same model")
        else:
            self._module.autograd_grad_sample_hooks = []
            self.autograd_grad_sample_hooks = self._module.autograd_grad_sample_hooks

        for module in self.trainable_modules():
            if type(module) in self.GRAD_SAMPLERS:
                self.autograd_grad_sample_hooks.append(
                    module.register_forward_hook(self.capture_activations_hook)
                )

                self.autograd_grad_sample_hooks.append(
                    module.register_backward_hook(
                        partial(
                            self.capture_backprops_hook,
                            loss_reduction=loss_reduction,
                            batch_first=batch_first,
                        )
                    )
                )
        self.enable_hooks()

    def enable_hooks(self) -> None:
        self.hooks_enabled = True

    def trainable_modules(self):
        return (m for m in self._module.modules() if requires_grad(m))

    def capture_activations_hook(
        self,
        module: nn.Module,
        forward_input: List[torch.Tensor],
        _forward_output: torch.Tensor,
    ):
        if not requires_grad(module) or not module.training:
            return

        if not self.hooks_enabled:
            return

        if not hasattr(module, "activations"):
            module.activations = []
        module.activations.append(forward_input[0].detach())  # pyre-ignore

    def capture_backprops_hook(
        self,
        module: nn.Module,
        _forward_input: torch.Tensor,
        forward_output: torch.Tensor,
        loss_reduction: str,
        batch_first: bool,
    ):
        if not self.hooks_enabled:
            return

        backprops = forward_output[0].detach()
        activations, backprops = self.rearrange_grad_samples(
            module, backprops, loss_reduction, batch_first
        )
        grad_sampler_fn = self.GRAD_SAMPLERS[type(module)]
        grad_sampler_fn(module, activations, backprops)

    def rearrange_grad_samples(self, module, backprops, loss_reduction, batch_first):
        if not hasattr(module, "activations"):
            raise ValueError(
                f"No activations detected for {type(module)},"
                " run forward after add_hooks(model)"
            )

        batch_dim = 0 if batch_first else 1

        activations = module.activations.pop()

        n = activations.shape[batch_dim]
        if loss_reduction == "mean":
            backprops = backprops * n
        elif loss_reduction == "sum":
            backprops = backprops
        else:
            raise ValueError(
                f"loss_reduction = {loss_reduction}. Only 'sum' and 'mean' losses are supported"
            )

        return activations, backprops


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(32, 256)
        self.fc2 = nn.Linear(256, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def main():
    torch.manual_seed(0)
    model = GradSampleModule(MLP())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    criterion = nn.CrossEntropyLoss()

    model.train()
    for step in range(10):
        data, target = torch.randn(64, 32), torch.randint(0, 10, (64,))
        optimizer.zero_grad()
        loss = criterion(model(data), target)
        loss.backward()
        optimizer.step()

    correct = 0
    total = 0
    with torch.no_grad():
        for batch in range(40):
            data, target = torch.randn(256, 32), torch.randint(0, 10, (256,))
            output = model(data)
            correct += (output.argmax(dim=1) == target).sum().item()
            total += target.numel()
    print("train loss {:.4f}, eval accuracy {:.3f}".format(loss.item(), correct / total))


if __name__ == "__main__":
    main()
