import torch


class ScaleShift(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.scale = scale
        ctx.result = x * scale + 1.0
        return ctx.result

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.scale, None


torch.manual_seed(0)
w = torch.randn(256, 256, requires_grad=True)
for step in range(60):
    y = ScaleShift.apply(w, 0.5)
    loss = y.square().mean()
    loss.backward()
print(f"{loss.item():.4f}")
