import torch
from torch import nn


class GradRecorder:
    def __init__(self, layers):
        self.grads = []
        for layer in layers:
            if hasattr(layer, "register_full_backward_hook"):
                layer.register_full_backward_hook(self.save_grad)
            else:
                layer.register_backward_hook(self.save_grad)

    def save_grad(self, module, grad_input, grad_output):
        self.grads = [grad_output[0].detach()] + self.grads


def count_calls(module, grad_input, grad_output):
    count_calls.n += 1


count_calls.n = 0


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 8))
    model[2].register_full_backward_hook(count_calls)  # once, before the loop
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(40):
        recorder = GradRecorder([model[1]])  # a new recorder each step; its hook stays
        x = torch.randn(64, 32)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"{loss.item():.6f} {count_calls.n} {len(recorder.grads)}")


if __name__ == "__main__":
    main()
