# Source: https://github.com/CIS-522/course-content/pull/2
#   code: the W2D1 tutorial notebook (W02_DLN/students, before the pull request): the helper
#   synthetic_dataset, linear_regression, squared_error and gradient_descent, the from-scratch
#   training cell of section 3.5 and the nn.Sequential training cell of section 4, both of which
#   append the loss tensor `l` to `losses` every epoch (the pull request changes it to
#   losses.append(l.detach()))
# Adapted: the student-version blanks of linear_regression and squared_error filled with the
#   formulas the cells expect (w.T @ X + b; squared difference); trange replaced by range with a
#   print every 250 epochs; time.sleep and the matplotlib plots dropped (the final loss is
#   printed instead); cpu, seeded as the notebook does.
import numpy as np
import torch
import torch.nn as nn


def synthetic_dataset(w, b, num_examples=1000, sigma=0.01, seed=2021):
    torch.manual_seed(seed)

    X = torch.normal(0, 1, (w.shape[0], num_examples))
    y = torch.matmul(w.T, X) + b
    # Add gaussian noise
    y += torch.normal(0, sigma, y.shape)

    return X, y.reshape((-1, 1))


def linear_regression(X, w, b):
    reg = torch.matmul(w.T, X) + b
    return reg


def squared_error(y_hat, y):
    err = (y_hat - y) ** 2
    return err


def gradient_descent(w, b, lr):
    with torch.no_grad():
        w -= w.grad * lr
        b -= b.grad * lr
        # Set gradient to zero to flush the cache
        w.grad.zero_()
        b.grad.zero_()

    return (w, b)


original_w = torch.tensor([2.5]).reshape(-1, 1)
original_b = 1.2
N = 1000  # number of examples
X, y = synthetic_dataset(original_w, original_b, num_examples=N, sigma=0.5)

# Section 3.5: gradient descent from scratch
lr = 1e-2  # learning rate
num_epochs = 1000  # number of epochs (updates)
net = linear_regression
loss = squared_error

y_train = y.squeeze()  # to avoid wrong broadcasting

w = torch.zeros(1, requires_grad=True)
b = torch.zeros(1, requires_grad=True)

losses = []

for epoch in range(num_epochs):
    if losses and epoch % 250 == 0:
        print("loss: {:.6f}".format(losses[-1]))

    y_hat = net(X, w, b)
    l = loss(y_hat, y_train).mean()  # Loss in `X` and `y`

    # Compute gradient on `l` with respect to `w`, `b`
    l.backward()
    w, b = gradient_descent(w, b, lr)  # Update parameters using their gradient

    losses.append(l)

w_train = w
b_train = b
print("from scratch:", w_train.item(), b_train.item(), "final loss", float(losses[-1]))

# Section 4: the same regression with nn.Linear and torch.optim
net = nn.Sequential(nn.Linear(1, 1))

net[0].weight.data.fill_(0)
net[0].bias.data.fill_(0)

loss = nn.MSELoss()

optimizer = torch.optim.SGD(net.parameters(), lr=1e-2)

losses = []

for epoch in range(num_epochs):
    if losses and epoch % 250 == 0:
        print("loss: {:.6f}".format(losses[-1]))

    l = loss(net(X.T), y)
    l.backward()
    optimizer.step()
    optimizer.zero_grad()
    l = loss(net(X.T), y)
    losses.append(l)

w_pytorch = net[0].weight.data
b_pytorch = net[0].bias.data
print(f"Original w: {original_w.item()}, from-scratch: {w_train.detach().item()}, pytorch: {w_pytorch.item()}")
print(f"Original b: {original_b}, from-scratch: {b_train.detach().item()}, pytorch: {b_pytorch.item()}")
