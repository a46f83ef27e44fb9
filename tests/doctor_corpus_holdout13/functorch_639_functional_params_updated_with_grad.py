# Source: https://github.com/pytorch/functorch/issues/639
#   code: the training loop of the report (functorch make_functional + grad, an SGD
#   update written as a list of new parameters)
# Adapted: functorch.make_functional is gone from current PyTorch: a stand-in with the same
#   interface is built on torch.func.functional_call (it returns the module's parameters as
#   a tuple of tensors that require grad, as make_functional did); MNIST replaced by random
#   28x28 images, a smaller MLP, 3 epochs of 40 batches of 64; no wandb logging.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call, grad


def make_functional(model):
    names = [n for n, _ in model.named_parameters()]
    params = tuple(p.detach().clone().requires_grad_(True) for p in model.parameters())

    def fmodel(params, x):
        return functional_call(model, dict(zip(names, params)), (x,))

    return fmodel, params


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


model = MLP()
func_model, params = make_functional(model)


def compute_loss(params, x, y):
    logits = func_model(params, x)
    return F.cross_entropy(logits, y)


def train_step(params, x, y, lr=0.1):
    grads = grad(compute_loss)(params, x, y)
    new_params = [p - lr * g for p, g in zip(params, grads)]
    return new_params


torch.manual_seed(0)
train_data = [(torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,))) for _ in range(40)]
for epoch in range(3):
    for x, y in train_data:
        params = train_step(params, x, y)
    with torch.no_grad():
        acc = (func_model(params, train_data[0][0]).argmax(1) == train_data[0][1]).float().mean()
    print(f"epoch {epoch} acc {acc.item():.3f}")
