# Source: https://github.com/rballester/tntorch/pull/19
#   code: tntorch/autodiff.py (optimize) at 67f8679^ (the parent of "Fixed memory leak in loss history")
# Adapted: no tntorch import: the tn.Tensor branch of the parameter collection is left out and
#   the tensors are two plain low-rank factors fitted to a 100x100 picture (the PR's example),
#   max_iter 150 instead of 1e4.
import torch
import numpy as np
import time
from functools import reduce


def optimize(tensors, loss_function, optimizer=torch.optim.Adam, tol=1e-4, max_iter=1e4, print_freq=500, verbose=True):
    """
    High-level wrapper for iterative learning.

    Default stopping criterion: either the absolute (or relative) loss improvement must fall below `tol`.
    In addition, the rate loss improvement must be slowing down.
    """

    if not isinstance(tensors, (list, tuple)):
        tensors = [tensors]
    parameters = []
    for t in tensors:
        if t.requires_grad:
            parameters.append(t)
    if len(parameters) == 0:
        raise ValueError("There are no parameters to optimize. Did you forget a requires_grad=True somewhere?")

    optimizer = optimizer(parameters)
    losses = []
    converged = False
    start = time.time()
    iter = 0
    while True:
        optimizer.zero_grad()
        loss = loss_function(*tensors)
        if not isinstance(loss, (tuple, list)):
            loss = [loss]
        losses.append(reduce(lambda x, y: x + y, loss))
        if len(losses) >= 2:
            delta_loss = (losses[-1] - losses[-2])
        else:
            delta_loss = float('-inf')
        if iter >= 2 and tol is not None and (losses[-1] <= tol or -delta_loss / losses[-1] <= tol) and losses[-2] - \
                losses[-1] < losses[-3] - losses[-2]:
            converged = True
            break
        if iter == max_iter:
            break
        if verbose and iter % print_freq == 0:
            print('iter: {: <{}} | loss: '.format(iter, len('{}'.format(max_iter))), end='')
            print(' + '.join(['{:10.6f}'.format(l.item()) for l in loss]), end='')
            if len(loss) > 1:
                print(' = {:10.4}'.format(losses[-1].item()), end='')
            print(' | total time: {:9.4f}'.format(time.time() - start))
        losses[-1].backward(retain_graph=True)
        optimizer.step()
        iter += 1
    if verbose:
        print('iter: {: <{}} | loss: '.format(iter, len('{}'.format(max_iter))), end='')
        print(' + '.join(['{:10.6f}'.format(l.item()) for l in loss]), end='')
        if len(loss) > 1:
            print(' = {:10.4}'.format(losses[-1].item()), end='')
        print(' | total time: {:9.4f}'.format(time.time() - start), end='')
        if converged:
            print(' <- converged (tol={})'.format(tol))
        else:
            print(' <- max_iter was reached: {}'.format(max_iter))


if __name__ == "__main__":
    torch.manual_seed(0)
    xs = torch.linspace(0, 1, 100)
    picture = torch.sin(8 * xs)[:, None] * torch.cos(5 * xs)[None, :] + 0.1 * torch.rand(100, 100)
    mask = torch.rand(100, 100) < 0.5
    U = torch.randn(100, 8, requires_grad=True)
    V = torch.randn(8, 100, requires_grad=True)

    def loss_function(U, V):
        approximation = U @ V
        return torch.mean((approximation[mask] - picture[mask]) ** 2), 1e-4 * (U.norm() ** 2 + V.norm() ** 2)

    optimize([U, V], loss_function, tol=0, max_iter=150, print_freq=50)
