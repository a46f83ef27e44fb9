import torch


def init_params(d_in, d_hidden, d_out):
    w1 = (torch.randn(d_in, d_hidden) * d_in ** -0.5).requires_grad_()
    b1 = torch.zeros(d_hidden, requires_grad=True)
    w2 = (torch.randn(d_hidden, d_out) * d_hidden ** -0.5).requires_grad_()
    b2 = torch.zeros(d_out, requires_grad=True)
    return [w1, b1, w2, b2]


def forward(params, x):
    w1, b1, w2, b2 = params
    return torch.tanh(x @ w1 + b1) @ w2 + b2


def main(steps=40, lr=0.05):
    torch.manual_seed(0)
    x = torch.randn(512, 20)
    y = torch.sin(x[:, :1] * 3)
    params = init_params(20, 128, 1)
    for step in range(steps):
        idx = torch.randint(0, 512, (64,))
        loss = ((forward(params, x[idx]) - y[idx]) ** 2).mean()
        loss.backward()
        with torch.no_grad():
            for p in params:
                p -= lr * p.grad
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
